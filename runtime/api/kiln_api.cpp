// The C boundary. Every exported function catches everything: kiln::Error becomes its
// status and the runtime's message; std::bad_alloc becomes KILN_ERR_OUT_OF_MEMORY; anything
// else KILN_ERR_INTERNAL. No exception leaves this file.
#include <cstring>
#include <new>
#include <string>

#include "archive.hpp"
#include "error.hpp"
#include "kernel.hpp"
#include "kiln/kiln.h"
#include "package.hpp"
#include "runtime.hpp"
#include "text.hpp"

namespace {

using kiln::Errc;
using kiln::Error;

kiln_status status_of(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return KILN_ERR_INVALID_ARGUMENT;
    case Errc::io: return KILN_ERR_IO;
    case Errc::malformed: return KILN_ERR_MALFORMED;
    case Errc::integrity: return KILN_ERR_INTEGRITY;
    case Errc::signature: return KILN_ERR_SIGNATURE;
    case Errc::manifest: return KILN_ERR_MANIFEST;
    case Errc::code_object: return KILN_ERR_CODE_OBJECT;
    case Errc::limit: return KILN_ERR_LIMIT;
    case Errc::unsupported: return KILN_ERR_UNSUPPORTED;
    case Errc::not_found: return KILN_ERR_NOT_FOUND;
    case Errc::refused: return KILN_ERR_REFUSED;
    case Errc::driver: return KILN_ERR_DRIVER;
    case Errc::reference_failed: return KILN_ERR_REFERENCE_FAILED;
    case Errc::internal: return KILN_ERR_INTERNAL;
  }
  return KILN_ERR_INTERNAL;
}

// Runs `body`, turning every exception into a status and (when there is a runtime to hold
// it) a message.
template <typename Body>
kiln_status guarded(const kiln_runtime* runtime, Body&& body) noexcept {
  try {
    body();
    return KILN_OK;
  } catch (const Error& e) {
    if (runtime) runtime->set_error(e.what());
    return status_of(e.code());
  } catch (const std::bad_alloc&) {
    if (runtime) runtime->set_error("out of memory");
    return KILN_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    if (runtime) runtime->set_error(std::string("internal error: ") + e.what());
    return KILN_ERR_INTERNAL;
  } catch (...) {
    if (runtime) runtime->set_error("internal error: an unknown exception (thrown by a reference function?)");
    return KILN_ERR_INTERNAL;
  }
}

// Options structs carry the caller's idea of their size. Smaller: an older caller, whose
// missing fields keep their defaults. Larger: a newer caller, accepted only if every byte
// this library does not know is zero (libbpf's rule), so no request is silently ignored.
template <typename T>
bool copy_sized(T* dst, const void* src, std::size_t caller_size) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  for (std::size_t i = sizeof(T); i < caller_size; ++i) {
    if (bytes[i] != 0) return false;
  }
  std::memcpy(dst, src, caller_size < sizeof(T) ? caller_size : sizeof(T));
  return true;
}

kiln_status copy_message(const std::string& text, char* buffer, std::size_t capacity, std::size_t* needed) {
  if (needed) *needed = text.size() + 1;
  if (capacity == 0) return buffer == nullptr ? KILN_OK : KILN_ERR_BUFFER_TOO_SMALL;
  if (buffer == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  std::size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
  return text.size() + 1 > capacity ? KILN_ERR_BUFFER_TOO_SMALL : KILN_OK;
}

}  // namespace

extern "C" {

kiln_status kiln_runtime_options_init(kiln_runtime_options* options, size_t size) {
  if (options == nullptr || size < sizeof(uint32_t)) return KILN_ERR_INVALID_ARGUMENT;
  kiln_runtime_options defaults{};
  defaults.size = static_cast<uint32_t>(size < sizeof defaults ? size : sizeof defaults);
  defaults.signature_threshold = 1;
  defaults.policy = KILN_POLICY_FALLBACK;
  defaults.log_level = KILN_LOG_WARN;
  defaults.max_member_size = 4ull << 30;
  std::memset(options, 0, size);
  std::memcpy(options, &defaults, size < sizeof defaults ? size : sizeof defaults);
  options->size = static_cast<uint32_t>(size);
  return KILN_OK;
}

kiln_status kiln_runtime_create(kiln_runtime** out, const kiln_runtime_options* options) {
  if (out == nullptr || options == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  if (options->size < sizeof(uint32_t) || !copy_sized(&o, options, options->size)) return KILN_ERR_INVALID_ARGUMENT;
  std::string why;
  kiln_status s = KILN_OK;
  try {
    *out = new kiln_runtime(o);
  } catch (const Error& e) {
    why = e.what();
    s = status_of(e.code());
  } catch (const std::bad_alloc&) {
    why = "out of memory";
    s = KILN_ERR_OUT_OF_MEMORY;
  } catch (...) {
    why = "internal error while creating the runtime";
    s = KILN_ERR_INTERNAL;
  }
  if (s != KILN_OK && o.error_buffer != nullptr && o.error_buffer_size > 0) {
    copy_message(why, o.error_buffer, o.error_buffer_size, nullptr);
  }
  return s;
}

void kiln_runtime_destroy(kiln_runtime* runtime) { delete runtime; }

kiln_status kiln_runtime_last_error(const kiln_runtime* runtime, char* buffer, size_t capacity, size_t* needed) {
  if (runtime == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  kiln_status status = KILN_OK;
  kiln_status guard = guarded(nullptr, [&] { status = copy_message(runtime->last_error(), buffer, capacity, needed); });
  return guard != KILN_OK ? guard : status;
}

kiln_status kiln_runtime_register_reference(kiln_runtime* runtime, const char* kernel, kiln_reference_fn fn, void* user) {
  if (runtime == nullptr || kernel == nullptr || kernel[0] == '\0') return KILN_ERR_INVALID_ARGUMENT;
  return guarded(runtime, [&] { runtime->set_reference(kernel, fn, user); });
}

kiln_status kiln_archive_open(kiln_runtime* runtime, const char* path, kiln_archive** out) {
  if (runtime == nullptr || path == nullptr || out == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  kiln_status s = guarded(runtime, [&] { *out = new kiln_archive(*runtime, path); });
  kiln::engine::Stats::bump(s == KILN_OK ? runtime->stats().archives_opened : runtime->stats().archive_open_failures);
  if (s != KILN_OK) runtime->log(KILN_LOG_ERROR, runtime->last_error());
  return s;
}

kiln_status kiln_archive_open_memory(kiln_runtime* runtime, const void* data, size_t size, kiln_archive** out) {
  if (runtime == nullptr || (data == nullptr && size > 0) || out == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  kiln_status s = guarded(runtime, [&] {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    *out = new kiln_archive(*runtime, std::vector<std::uint8_t>(bytes, bytes + size));
  });
  kiln::engine::Stats::bump(s == KILN_OK ? runtime->stats().archives_opened : runtime->stats().archive_open_failures);
  if (s != KILN_OK) runtime->log(KILN_LOG_ERROR, runtime->last_error());
  return s;
}

void kiln_archive_destroy(kiln_archive* archive) { delete archive; }

const char* kiln_archive_digest(const kiln_archive* a) { return a ? a->digest().c_str() : nullptr; }
const char* kiln_archive_package(const kiln_archive* a) { return a ? a->reader().package().c_str() : nullptr; }
const char* kiln_archive_revision(const kiln_archive* a) { return a ? a->reader().kernel_revision().c_str() : nullptr; }
uint64_t kiln_archive_sequence(const kiln_archive* a) { return a ? a->reader().sequence() : 0; }
size_t kiln_archive_kernel_count(const kiln_archive* a) { return a ? a->reader().kernel_table().size() : 0; }

const char* kiln_archive_kernel_name(const kiln_archive* a, size_t index) {
  if (a == nullptr) return nullptr;
  // The names come from the index (every page, read once); an archive whose kernel records do
  // not match kiln/kernels.bin answers NULL here and fails kiln_archive_warm with the reason.
  try {
    const std::vector<std::string>& names = a->reader().kernel_names();
    return index < names.size() ? names[index].c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

kiln_status kiln_archive_warm(kiln_archive* archive, int device) {
  if (archive == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  return guarded(&archive->runtime(), [&] { archive->warm(device); });
}

kiln_status kiln_archive_preflight(kiln_archive* archive, int device, char* buffer, size_t capacity, size_t* needed) {
  if (archive == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  kiln_status status = KILN_OK;
  kiln_status guard = guarded(&archive->runtime(), [&] {
    auto quote = [](const std::string& s) { return kiln::json_quote(s); };
    const std::vector<std::string>& names = archive->reader().kernel_names();
    std::string json = "{\"digest\":" + quote(archive->digest()) + ",\"device\":" + std::to_string(device) + ",\"kernels\":[";
    for (std::size_t i = 0; i < names.size(); ++i) {
      kiln_kernel* k = archive->kernel(names[i], device);
      json += std::string(i ? "," : "") + "{\"kernel\":" + quote(names[i]) + ",\"route\":" +
              quote(kiln_route_string(k->route)) + ",\"reason\":" + quote(kiln_reason_string(k->reason)) +
              ",\"target\":" + quote(k->target) + ",\"detail\":" + quote(k->reason_text) + "}";
    }
    json += "]}";
    status = copy_message(json, buffer, capacity, needed);
  });
  return guard != KILN_OK ? guard : status;
}

kiln_status kiln_archive_get_kernel(kiln_archive* archive, const char* name, int device, kiln_kernel** out) {
  if (archive == nullptr || name == nullptr || out == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(&archive->runtime(), [&] { *out = archive->kernel(name, device); });
}

kiln_route kiln_kernel_route(const kiln_kernel* k) { return k ? k->route : KILN_ROUTE_REFUSED; }
kiln_reason kiln_kernel_reason(const kiln_kernel* k) { return k ? k->reason : KILN_REASON_NO_DEVICE; }
const char* kiln_kernel_reason_text(const kiln_kernel* k) { return k ? k->reason_text.c_str() : ""; }
const char* kiln_kernel_target(const kiln_kernel* k) { return k ? k->target.c_str() : ""; }
const char* kiln_kernel_name(const kiln_kernel* k) { return k ? k->spec.name.c_str() : ""; }
const char* kiln_kernel_archive_digest(const kiln_kernel* k) { return k ? k->archive->digest().c_str() : ""; }
const char* kiln_kernel_package(const kiln_kernel* k) { return k ? k->archive->reader().package().c_str() : ""; }
const char* kiln_kernel_revision(const kiln_kernel* k) {
  return k ? k->archive->reader().kernel_revision().c_str() : "";
}
size_t kiln_kernel_param_count(const kiln_kernel* k) { return k ? k->spec.params.size() : 0; }

kiln_status kiln_kernel_param(const kiln_kernel* k, size_t index, kiln_param_info* info) {
  if (k == nullptr || info == nullptr || info->size < 2 * sizeof(uint32_t) || index >= k->spec.params.size()) {
    return KILN_ERR_INVALID_ARGUMENT;
  }
  const kiln::KernelParam& p = k->spec.params[index];
  kiln_param_info full{};
  full.size = info->size;
  full.is_pointer = p.is_pointer ? 1 : 0;
  full.dtype = static_cast<uint32_t>(p.type) + 1;  // ScalarType is i8..f64 in kiln_dtype's order
  full.access = static_cast<uint32_t>(p.access);
  full.name = p.name.c_str();
  std::memcpy(info, &full, info->size < sizeof full ? info->size : sizeof full);
  return KILN_OK;
}

kiln_status kiln_kernel_launch(kiln_kernel* kernel, void* const* args, size_t arg_count, void* stream,
                               kiln_route* route_taken) {
  if (kernel == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  return guarded(&kernel->archive->runtime(), [&] {
    kiln_route r = kernel->launch(args, arg_count, stream);
    if (route_taken) *route_taken = r;
  });
}

kiln_status kiln_package_open(kiln_runtime* runtime, const char* store_dir, const char* package, int device,
                              kiln_package** out) {
  if (runtime == nullptr || store_dir == nullptr || package == nullptr || out == nullptr || device < 0) {
    return KILN_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  return guarded(runtime, [&] { *out = new kiln_package(*runtime, store_dir, package, device); });
}

void kiln_package_destroy(kiln_package* package) { delete package; }

kiln_status kiln_package_reload(kiln_package* package, int* switched) {
  if (package == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  return guarded(&package->runtime(), [&] {
    bool did = package->reload();
    if (switched) *switched = did ? 1 : 0;
  });
}

kiln_status kiln_package_digest(kiln_package* package, char* buffer, size_t capacity) {
  if (package == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  kiln_status status = KILN_OK;
  kiln_status guard = guarded(&package->runtime(), [&] { status = copy_message(package->digest(), buffer, capacity, nullptr); });
  return guard != KILN_OK ? guard : status;
}

kiln_status kiln_package_launch(kiln_package* package, const char* kernel, void* const* args, size_t arg_count,
                                void* stream, kiln_route* route_taken) {
  if (package == nullptr || kernel == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  return guarded(&package->runtime(), [&] {
    kiln_route r = package->launch(kernel, args, arg_count, stream);
    if (route_taken) *route_taken = r;
  });
}

kiln_status kiln_runtime_stats(const kiln_runtime* runtime, kiln_stats* stats) {
  if (runtime == nullptr || stats == nullptr || stats->size < 2 * sizeof(uint32_t)) return KILN_ERR_INVALID_ARGUMENT;
  runtime->stats().snapshot(stats);
  return KILN_OK;
}

kiln_status kiln_runtime_stats_prometheus(const kiln_runtime* runtime, char* buffer, size_t capacity, size_t* needed) {
  if (runtime == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  kiln_status status = KILN_OK;
  kiln_status guard = guarded(runtime, [&] { status = copy_message(runtime->stats().prometheus(), buffer, capacity, needed); });
  return guard != KILN_OK ? guard : status;
}

}  // extern "C"
