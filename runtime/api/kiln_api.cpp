// The C boundary. Every exported function catches everything (api_support.hpp's `guarded`):
// kiln::Failure becomes its status and the calling thread's message; std::bad_alloc becomes
// KILN_ERR_OUT_OF_MEMORY; anything else KILN_ERR_INTERNAL. No exception leaves this file.
// Argument errors are recorded like any other failure, and a success clears the message.
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "core/error.hpp"
#include "engine/archive.hpp"
#include "engine/kernel.hpp"
#include "engine/package.hpp"
#include "engine/runtime.hpp"
#include "kiln/kiln.h"

using kiln::api::bad_struct_size;
using kiln::api::copy_message;
using kiln::api::engine_of;
using kiln::api::handle_of;
using kiln::api::kernel_of;
using kiln::api::guarded;
using kiln::api::guarded_status;
using kiln::api::HandleKind;
using kiln::api::invalid;
using kiln::status_of;
using kiln::Errc;
using kiln::Failure;

namespace {

// The manifest's scalar types as the C API numbers them; a switch, so that reordering either
// enum cannot silently renumber the other.
uint32_t dtype_of(kiln::ScalarType t) {
  switch (t) {
    case kiln::ScalarType::i8: return KILN_DTYPE_I8;
    case kiln::ScalarType::i16: return KILN_DTYPE_I16;
    case kiln::ScalarType::i32: return KILN_DTYPE_I32;
    case kiln::ScalarType::i64: return KILN_DTYPE_I64;
    case kiln::ScalarType::u8: return KILN_DTYPE_U8;
    case kiln::ScalarType::u16: return KILN_DTYPE_U16;
    case kiln::ScalarType::u32: return KILN_DTYPE_U32;
    case kiln::ScalarType::u64: return KILN_DTYPE_U64;
    case kiln::ScalarType::f16: return KILN_DTYPE_F16;
    case kiln::ScalarType::bf16: return KILN_DTYPE_BF16;
    case kiln::ScalarType::f32: return KILN_DTYPE_F32;
    case kiln::ScalarType::f64: return KILN_DTYPE_F64;
    case kiln::ScalarType::f8e4m3: return KILN_DTYPE_F8E4M3;
    case kiln::ScalarType::f8e5m2: return KILN_DTYPE_F8E5M2;
  }
  return 0;
}

}  // namespace

extern "C" {

kiln_status kiln_runtime_options_init(kiln_runtime_options* options, size_t size) {
  if (options == nullptr) return invalid(nullptr, "kiln_runtime_options_init: options is NULL");
  if (!kiln::api::struct_size_ok(size)) return bad_struct_size("kiln_runtime_options_init: size", size);
  kiln_runtime_options defaults{};
  defaults.signature_threshold = 1;
  defaults.policy = KILN_POLICY_FALLBACK;
  defaults.log_level = KILN_LOG_WARN;
  defaults.max_member_size = kiln::kDefaultMaxMemberSize;
  defaults.attestation_threshold = 1;
  kiln::api::init_sized(options, defaults, size);
  options->size = static_cast<uint32_t>(size);
  kiln::api::clear_error();
  return KILN_OK;
}

kiln_status kiln_runtime_create(kiln_runtime** out, const kiln_runtime_options* options) {
  if (out == nullptr || options == nullptr) return invalid(nullptr, "kiln_runtime_create: out and options are required");
  *out = nullptr;
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  std::string why;
  kiln_status s = KILN_OK;
  if (!kiln::api::struct_size_ok(options->size)) {
    // Not even error_buffer can be read from a struct whose size is unknown: the thread's last
    // error alone says why.
    return bad_struct_size("kiln_runtime_create: options->size", options->size);
  }
  if (!kiln::api::copy_sized(&o, options, options->size)) {
    why = "kiln_runtime_create: options has non-zero bytes beyond what this libkiln knows (a newer "
          "caller's field it cannot honour)";
    s = invalid(nullptr, why);
  } else {
    s = guarded(nullptr, [&] {
      auto runtime = std::make_unique<kiln_runtime>(o);
      kiln::api::track(HandleKind::runtime, runtime.get());
      *out = runtime.release();
    });
    if (s != KILN_OK) why = kiln::api::thread_error();
  }
  // v1's channel for the same message: the options' own buffer.
  if (s != KILN_OK && o.error_buffer != nullptr && o.error_buffer_size > 0) {
    copy_message(why, o.error_buffer, o.error_buffer_size, nullptr);
  }
  return s;
}

void kiln_runtime_destroy(kiln_runtime* runtime) {
  if (runtime != nullptr && kiln::api::untrack(HandleKind::runtime, runtime)) delete runtime;
}

kiln_status kiln_runtime_last_error(const kiln_runtime* runtime, char* buffer, size_t capacity, size_t* needed) {
  if (runtime == nullptr) return KILN_ERR_INVALID_ARGUMENT;  // reads errors; records none
  try {
    const std::string* own = kiln::api::thread_error_for(engine_of(runtime));
    return copy_message(own != nullptr ? *own : runtime->impl.last_error(), buffer, capacity, needed);
  } catch (...) {
    return KILN_ERR_OUT_OF_MEMORY;
  }
}

kiln_status kiln_last_error(char* buffer, size_t capacity, size_t* needed) {
  return copy_message(kiln::api::thread_error(), buffer, capacity, needed);
}

kiln_status kiln_runtime_set_reference(kiln_runtime* runtime, const char* kernel, kiln_reference_cb fn, void* user,
                                       kiln_release_cb release) {
  if (runtime == nullptr || kernel == nullptr || kernel[0] == '\0') {
    return invalid(engine_of(runtime), "kiln_runtime_set_reference: runtime and a non-empty kernel name are required");
  }
  return guarded(engine_of(runtime), [&] { runtime->impl.set_reference(kernel, {fn, nullptr}, user, release); });
}

kiln_status kiln_runtime_register_reference(kiln_runtime* runtime, const char* kernel, kiln_reference_fn fn, void* user) {
  if (runtime == nullptr || kernel == nullptr || kernel[0] == '\0') {
    return invalid(engine_of(runtime), "kiln_runtime_register_reference: runtime and a non-empty kernel name are required");
  }
  // Kept as registered and called through its own type (engine::Runtime::ReferenceFn).
  return guarded(engine_of(runtime), [&] { runtime->impl.set_reference(kernel, {nullptr, fn}, user, nullptr); });
}

void kiln_call_set_error(kiln_call_info* info, const char* message) {
  if (info == nullptr || message == nullptr) return;
  kiln::engine::CallContext* call = kiln::engine::CallContext::current();
  if (call == nullptr || &call->info != info) return;  // not the info of a reference running on this thread
  try {
    call->error = message;
  } catch (...) {
  }
}

kiln_status kiln_archive_open(kiln_runtime* runtime, const char* path, kiln_archive** out) {
  if (runtime == nullptr || path == nullptr || out == nullptr) {
    return invalid(engine_of(runtime), "kiln_archive_open: runtime, path and out are required");
  }
  *out = nullptr;
  kiln_status s = guarded(engine_of(runtime), [&] {
    auto archive = std::make_unique<kiln_archive>(*runtime, path);
    kiln::api::track(HandleKind::archive, archive.get());
    *out = archive.release();
  });
  kiln::engine::Stats::bump(s == KILN_OK ? runtime->impl.stats().archives_opened : runtime->impl.stats().archive_open_failures);
  if (s != KILN_OK) runtime->impl.log(KILN_LOG_ERROR, kiln::api::thread_error());
  return s;
}

kiln_status kiln_archive_open_memory(kiln_runtime* runtime, const void* data, size_t size, kiln_archive** out) {
  if (runtime == nullptr || (data == nullptr && size > 0) || out == nullptr) {
    return invalid(engine_of(runtime), "kiln_archive_open_memory: runtime, data (or size 0) and out are required");
  }
  *out = nullptr;
  kiln_status s = guarded(engine_of(runtime), [&] {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    auto archive = std::make_unique<kiln_archive>(*runtime, std::vector<std::uint8_t>(bytes, bytes + size));
    kiln::api::track(HandleKind::archive, archive.get());
    *out = archive.release();
  });
  kiln::engine::Stats::bump(s == KILN_OK ? runtime->impl.stats().archives_opened : runtime->impl.stats().archive_open_failures);
  if (s != KILN_OK) runtime->impl.log(KILN_LOG_ERROR, kiln::api::thread_error());
  return s;
}

void kiln_archive_destroy(kiln_archive* archive) {
  if (archive != nullptr && kiln::api::untrack(HandleKind::archive, archive)) delete archive;
}

kiln_status kiln_archive_add_attestation(kiln_archive* archive, const void* envelope, size_t size) {
  if (archive == nullptr || (envelope == nullptr && size > 0)) {
    return invalid(nullptr, "kiln_archive_add_attestation: archive and envelope (or size 0) are required");
  }
  return guarded(&archive->impl.runtime(), [&] {
    archive->impl.add_attestation(std::string(static_cast<const char*>(envelope), size), "the attestation given");
  });
}

const char* kiln_archive_digest(const kiln_archive* a) { return a ? a->impl.digest().c_str() : ""; }
const char* kiln_archive_package(const kiln_archive* a) { return a ? a->impl.reader().package().c_str() : ""; }
const char* kiln_archive_revision(const kiln_archive* a) { return a ? a->impl.reader().kernel_revision().c_str() : ""; }
uint64_t kiln_archive_sequence(const kiln_archive* a) { return a ? a->impl.reader().sequence() : 0; }
size_t kiln_archive_kernel_count(const kiln_archive* a) { return a ? a->impl.reader().kernel_table().size() : 0; }

const char* kiln_archive_kernel_name(const kiln_archive* a, size_t index) {
  if (a == nullptr) return nullptr;
  // The names come from the index (every page, read once); an archive whose kernel records do
  // not match kiln/kernels.bin answers NULL here and fails kiln_archive_warm with the reason.
  try {
    const std::vector<std::string>& names = a->impl.reader().kernel_names();
    return index < names.size() ? names[index].c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

kiln_status kiln_archive_warm(kiln_archive* archive, int device) {
  if (archive == nullptr) return invalid(nullptr, "kiln_archive_warm: archive is NULL");
  return guarded(&archive->impl.runtime(), [&] { archive->impl.warm(device); });
}

kiln_status kiln_archive_preflight(kiln_archive* archive, int device, char* buffer, size_t capacity, size_t* needed) {
  if (archive == nullptr) return invalid(nullptr, "kiln_archive_preflight: archive is NULL");
  return guarded_status(&archive->impl.runtime(), "kiln_archive_preflight: the report does not fit the buffer", [&] {
    std::string json = archive->impl.preflight_json(device);
    return copy_message(json, buffer, capacity, needed);
  });
}

kiln_status kiln_archive_preflight_target(kiln_archive* archive, const char* target, const char* driver, char* buffer,
                                          size_t capacity, size_t* needed) {
  if (archive == nullptr || target == nullptr) {
    return invalid(archive ? &archive->impl.runtime() : nullptr, "kiln_archive_preflight_target: archive and target are required");
  }
  return guarded_status(&archive->impl.runtime(), "kiln_archive_preflight_target: the report does not fit the buffer", [&] {
    std::string json = archive->impl.preflight_target_json(target, driver != nullptr ? driver : "");
    return copy_message(json, buffer, capacity, needed);
  });
}

kiln_status kiln_archive_read_member(kiln_archive* archive, const char* path, void* buffer, size_t capacity, size_t* size) {
  if (archive == nullptr || path == nullptr || (buffer == nullptr && capacity > 0)) {
    return invalid(archive ? &archive->impl.runtime() : nullptr,
                   "kiln_archive_read_member: archive and path are required (and a buffer where capacity > 0)");
  }
  if (size != nullptr) *size = 0;
  return guarded_status(&archive->impl.runtime(), "kiln_archive_read_member: the member does not fit the buffer", [&] {
    const kiln::ArchiveReader& reader = archive->impl.reader();
    long i = reader.find(path);
    if (i < 0) {
      throw Failure(Errc::not_found, reader.name() + ": no member named '" + std::string(path) + "'");
    }
    // The length comes from the signed index: a size query reads and decompresses nothing. A
    // length over the reader's bound is refused here too, so that no caller sizes a buffer from it.
    std::uint64_t length = reader.entry(static_cast<std::size_t>(i)).content_size;
    reader.require_present(static_cast<std::size_t>(i));  // a sparse archive's absent member has no size to offer
    if (length > reader.max_member_size()) {
      throw Failure(Errc::limit, reader.name() + ": member '" + std::string(path) + "' declares " + std::to_string(length) +
                                   " bytes of content, over the reader's limit of " +
                                   std::to_string(reader.max_member_size()));
    }
    if (size != nullptr) *size = static_cast<size_t>(length);
    if (length > capacity) return KILN_ERR_BUFFER_TOO_SMALL;
    std::vector<std::uint8_t> content = reader.read_member(static_cast<std::size_t>(i));
    if (!content.empty()) std::memcpy(buffer, content.data(), content.size());
    return KILN_OK;
  });
}

kiln_status kiln_archive_get_kernel(kiln_archive* archive, const char* name, int device, kiln_kernel** out) {
  if (archive == nullptr || name == nullptr || out == nullptr) {
    return invalid(archive ? &archive->impl.runtime() : nullptr, "kiln_archive_get_kernel: archive, name and out are required");
  }
  *out = nullptr;
  return guarded(&archive->impl.runtime(), [&] { *out = handle_of(archive->impl.kernel(name, device)); });
}

kiln_route kiln_kernel_route(const kiln_kernel* k) { return k ? kernel_of(k)->route() : KILN_ROUTE_REFUSED; }
kiln_reason kiln_kernel_reason(const kiln_kernel* k) { return k ? kernel_of(k)->reason() : KILN_REASON_NO_DEVICE; }
const char* kiln_kernel_reason_text(const kiln_kernel* k) { return k ? kernel_of(k)->reason_text().c_str() : ""; }
const char* kiln_kernel_target(const kiln_kernel* k) { return k ? kernel_of(k)->target().c_str() : ""; }
const char* kiln_kernel_name(const kiln_kernel* k) { return k ? kernel_of(k)->name().c_str() : ""; }
const char* kiln_kernel_archive_digest(const kiln_kernel* k) { return k ? kernel_of(k)->archive().digest().c_str() : ""; }
const char* kiln_kernel_package(const kiln_kernel* k) { return k ? kernel_of(k)->archive().reader().package().c_str() : ""; }
const char* kiln_kernel_revision(const kiln_kernel* k) {
  return k ? kernel_of(k)->archive().reader().kernel_revision().c_str() : "";
}
size_t kiln_kernel_param_count(const kiln_kernel* k) { return k ? kernel_of(k)->spec().params.size() : 0; }

kiln_status kiln_param_info_init(kiln_param_info* info, size_t size) {
  return kiln::api::init_struct(info, kiln_param_info{}, size, "kiln_param_info_init");
}

kiln_status kiln_kernel_param(const kiln_kernel* k, size_t index, kiln_param_info* info) {
  const kiln::engine::Runtime* rt = k ? &kernel_of(k)->archive().runtime() : nullptr;
  if (k == nullptr || info == nullptr) return invalid(rt, "kiln_kernel_param: kernel and info are required");
  if (!kiln::api::filled_size_ok(info->size)) {
    return invalid(rt, "kiln_kernel_param: info->size " + std::to_string(info->size) +
                           " is not a size of kiln_param_info (fill it with kiln_param_info_init)");
  }
  if (index >= kernel_of(k)->spec().params.size()) {
    return invalid(rt, "kiln_kernel_param: kernel '" + kernel_of(k)->spec().name + "' has " + std::to_string(kernel_of(k)->spec().params.size()) +
                           " parameters, index " + std::to_string(index) + " is past them");
  }
  const kiln::KernelParam& p = kernel_of(k)->spec().params[index];
  kiln_param_info full{};
  full.size = info->size;
  full.is_pointer = p.is_pointer ? 1 : 0;
  full.dtype = dtype_of(p.type);
  full.access = static_cast<uint32_t>(p.access);
  full.name = p.name.c_str();
  std::memcpy(info, &full, info->size < sizeof full ? info->size : sizeof full);
  kiln::api::clear_error();
  return KILN_OK;
}

kiln_status kiln_kernel_launch_checked(kiln_kernel* kernel, void* const* args, const size_t* arg_sizes, size_t arg_count,
                                       void* stream, kiln_route* route_taken) {
  if (kernel == nullptr) return invalid(nullptr, "kiln_kernel_launch: kernel is NULL");
  return guarded(&kernel_of(kernel)->archive().runtime(), [&] {
    kiln_route r = kernel_of(kernel)->launch(args, arg_count, stream, arg_sizes);
    if (route_taken) *route_taken = r;
  });
}

kiln_status kiln_kernel_launch(kiln_kernel* kernel, void* const* args, size_t arg_count, void* stream,
                               kiln_route* route_taken) {
  return kiln_kernel_launch_checked(kernel, args, nullptr, arg_count, stream, route_taken);
}

kiln_status kiln_kernel_explain(const kiln_kernel* kernel, void* const* args, size_t arg_count, char* buffer,
                                size_t capacity, size_t* needed) {
  if (kernel == nullptr) return invalid(nullptr, "kiln_kernel_explain: kernel is NULL");
  const kiln::engine::Kernel* k = kernel_of(kernel);
  return guarded_status(&k->archive().runtime(), "kiln_kernel_explain: the text does not fit the buffer", [&] {
    return copy_message(k->explain_call(args, arg_count), buffer, capacity, needed);
  });
}

kiln_status kiln_package_open(kiln_runtime* runtime, const char* store_dir, const char* package, int device,
                              kiln_package** out) {
  if (runtime == nullptr || store_dir == nullptr || package == nullptr || out == nullptr || device < 0) {
    return invalid(engine_of(runtime), "kiln_package_open: runtime, store_dir, package, a device >= 0 and out are required");
  }
  *out = nullptr;
  return guarded(engine_of(runtime), [&] {
    auto opened = std::make_unique<kiln_package>(*runtime, store_dir, package, device);
    kiln::api::track(HandleKind::package, opened.get());
    *out = opened.release();
  });
}

kiln_status kiln_package_open_witnessed(kiln_runtime* runtime, const char* store_dir, const char* package, int device,
                                       const char* witness_head, kiln_package** out) {
  if (runtime == nullptr || store_dir == nullptr || package == nullptr || out == nullptr || device < 0) {
    return invalid(engine_of(runtime),
                   "kiln_package_open_witnessed: runtime, store_dir, package, a device >= 0 and out are required");
  }
  *out = nullptr;
  return guarded(engine_of(runtime), [&] {
    // `kiln store head` prints "<64 hex> <records>": the hash is the witness, the count may follow.
    std::string witness = witness_head != nullptr ? witness_head : "";
    witness = witness.substr(0, witness.find_first_of(" \t\n"));
    auto opened = std::make_unique<kiln_package>(*runtime, store_dir, package, device, witness);
    kiln::api::track(HandleKind::package, opened.get());
    *out = opened.release();
  });
}

void kiln_package_destroy(kiln_package* package) {
  if (package != nullptr && kiln::api::untrack(HandleKind::package, package)) delete package;
}

kiln_status kiln_package_reload(kiln_package* package, int* switched) {
  if (package == nullptr) return invalid(nullptr, "kiln_package_reload: package is NULL");
  return guarded(&package->impl.runtime(), [&] {
    bool did = package->impl.reload();
    if (switched) *switched = did ? 1 : 0;
  });
}

kiln_status kiln_package_active_digest(kiln_package* package, char* buffer, size_t capacity, size_t* needed) {
  if (package == nullptr) return invalid(nullptr, "kiln_package_digest: package is NULL");
  return guarded_status(&package->impl.runtime(), "kiln_package_digest: the digest does not fit the buffer (72 bytes do)",
                        [&] { return copy_message(package->impl.digest(), buffer, capacity, needed); });
}

kiln_status kiln_package_digest(kiln_package* package, char* buffer, size_t capacity) {
  return kiln_package_active_digest(package, buffer, capacity, nullptr);
}

kiln_status kiln_package_launch(kiln_package* package, const char* kernel, void* const* args, size_t arg_count,
                                void* stream, kiln_route* route_taken) {
  if (package == nullptr || kernel == nullptr) return invalid(nullptr, "kiln_package_launch: package and kernel are required");
  return guarded(&package->impl.runtime(), [&] {
    kiln_route r = package->impl.launch(kernel, args, arg_count, stream);
    if (route_taken) *route_taken = r;
  });
}

kiln_status kiln_stats_init(kiln_stats* stats, size_t size) {
  return kiln::api::init_struct(stats, kiln_stats{}, size, "kiln_stats_init");
}

kiln_status kiln_runtime_stats(const kiln_runtime* runtime, kiln_stats* stats) {
  if (runtime == nullptr || stats == nullptr) return invalid(engine_of(runtime), "kiln_runtime_stats: runtime and stats are required");
  if (!kiln::api::filled_size_ok(stats->size)) {
    return invalid(engine_of(runtime), "kiln_runtime_stats: stats->size " + std::to_string(stats->size) +
                                " is not a size of kiln_stats (fill it with kiln_stats_init)");
  }
  runtime->impl.stats().snapshot(stats);
  kiln::api::clear_error();
  return KILN_OK;
}

kiln_status kiln_runtime_stats_prometheus(const kiln_runtime* runtime, char* buffer, size_t capacity, size_t* needed) {
  if (runtime == nullptr) return invalid(nullptr, "kiln_runtime_stats_prometheus: runtime is NULL");
  return guarded_status(engine_of(runtime), "kiln_runtime_stats_prometheus: the text does not fit the buffer",
                        [&] { return copy_message(runtime->impl.stats().prometheus(), buffer, capacity, needed); });
}

}  // extern "C"
