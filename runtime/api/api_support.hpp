// What every function of the C boundary shares: the status of an exception, the calling
// thread's last error, buffer copies, the caller-sized struct rules, and the registry of live
// handles that makes a second destroy harmless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "api/handles.hpp"
#include "core/error.hpp"
#include "core/status.hpp"
#include "kiln/kiln.h"

namespace kiln::api {

// The calling thread's last error (kiln_last_error) and, where a runtime is known, that
// runtime's latest message too (kiln_runtime_last_error, v1).
void record_error(const engine::Runtime* runtime, const std::string& message);
void clear_error();
const std::string& thread_error();
// The message this thread recorded for `runtime`, or null if its last failure was elsewhere.
const std::string* thread_error_for(const engine::Runtime* runtime);

// The engine's runtime behind a C handle (null stays null).
inline const engine::Runtime* engine_of(const kiln_runtime* r) { return r != nullptr ? &r->impl : nullptr; }

// An argument error: recorded like any failure, returned as KILN_ERR_INVALID_ARGUMENT.
kiln_status invalid(const engine::Runtime* runtime, const std::string& message);

// Copies `text` and its NUL into a caller's buffer. `needed` gets text.size() + 1;
// KILN_ERR_BUFFER_TOO_SMALL whenever that is more than `capacity` (a size query included).
kiln_status copy_message(const std::string& text, char* buffer, std::size_t capacity, std::size_t* needed);

// Caller-sized structs ({size, ...}, filled by an *_init function): the size a caller may
// claim, between the first field and KILN_MAX_STRUCT_SIZE.
bool struct_size_ok(std::size_t size);
// The argument error for a size that is not one of a caller-sized struct (`what` names it).
kiln_status bad_struct_size(const std::string& what, std::size_t size);
// An output struct whose own first field says its size (as its *_init function set it): false
// when that size cannot be one (too small to hold the size field and one more, or too large).
inline bool filled_size_ok(std::uint32_t size) { return size >= 2 * sizeof(std::uint32_t) && size <= KILN_MAX_STRUCT_SIZE; }

// Zero-fills a caller's struct of `size` bytes and copies in what this library knows of `known`.
template <typename T>
void init_sized(T* out, const T& known, std::size_t size) {
  std::memset(out, 0, size);
  std::memcpy(out, &known, size < sizeof(T) ? size : sizeof(T));
}
// Copies a caller's struct of `caller_size` bytes into this library's `dst`. Smaller: an older
// caller, whose missing fields keep their defaults. Larger: a newer caller, accepted only if
// every byte this library does not know is zero (libbpf's rule), so no request is ignored.
template <typename T>
bool copy_sized(T* dst, const void* src, std::size_t caller_size) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  for (std::size_t i = sizeof(T); i < caller_size; ++i) {
    if (bytes[i] != 0) return false;
  }
  std::memcpy(dst, src, caller_size < sizeof(T) ? caller_size : sizeof(T));
  return true;
}

// A *_init function of a caller-sized struct: `out` zero-filled up to `size`, this library's
// defaults `known` copied in, its size field set. `what` names the function in errors.
template <typename T>
kiln_status init_struct(T* out, const T& known, std::size_t size, const char* what) {
  if (out == nullptr) return invalid(nullptr, std::string(what) + ": the struct pointer is NULL");
  if (!struct_size_ok(size)) return bad_struct_size(std::string(what) + ": size", size);
  init_sized(out, known, size);
  out->size = static_cast<std::uint32_t>(size);
  clear_error();
  return KILN_OK;
}

// Fills a caller's output struct with `full`, as far as the size its own first field states.
template <typename T>
kiln_status fill_struct(T* out, T full, const engine::Runtime* runtime, const char* what) {
  if (!filled_size_ok(out->size)) {
    return invalid(runtime, std::string(what) + ": its size field " + std::to_string(out->size) +
                                " is not a size of this struct (fill it with its *_init function first)");
  }
  full.size = out->size;
  std::memcpy(out, &full, out->size < sizeof full ? out->size : sizeof full);
  clear_error();
  return KILN_OK;
}

// Live handles by kind: created handles are added, a destroy removes one and frees it only if
// it was there, so a second destroy of the same pointer does nothing.
enum class HandleKind { runtime, archive, package };
void track(HandleKind kind, const void* handle);
bool untrack(HandleKind kind, const void* handle);

// Runs `body`; an exception becomes its status and the recorded message (no exception leaves
// the C boundary); a success clears the thread's last error.
template <typename Body>
kiln_status guarded(const engine::Runtime* runtime, Body&& body) noexcept {
  try {
    body();
    clear_error();
    return KILN_OK;
  } catch (const Failure& e) {
    record_error(runtime, e.what());
    return status_of(e.code());
  } catch (const std::bad_alloc&) {
    record_error(runtime, "out of memory");
    return KILN_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    record_error(runtime, std::string("internal error: ") + e.what());
    return KILN_ERR_INTERNAL;
  } catch (...) {
    record_error(runtime, "internal error: an unknown exception (thrown by a reference function?)");
    return KILN_ERR_INTERNAL;
  }
}

// `guarded` for a body that itself returns a status (a buffer copy that may not fit): that
// status is returned, and a non-OK one is recorded with `what` as the message.
template <typename Body>
kiln_status guarded_status(const engine::Runtime* runtime, const char* what, Body&& body) noexcept {
  kiln_status inner = KILN_OK;
  kiln_status outer = guarded(runtime, [&] { inner = body(); });
  if (outer != KILN_OK) return outer;
  if (inner != KILN_OK) record_error(runtime, what);
  return inner;
}

}  // namespace kiln::api
