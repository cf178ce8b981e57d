// kiln.hpp: a header-only C++17 face over libkiln's C API (kiln.h), in the manner of ONNX Runtime's
// onnxruntime_cxx_api.h over its C API. It adds no behaviour of its own: every call is the
// kiln.h function of the same name, with
//  - move-only owners (Runtime, Archive, Package) for the handles kiln.h creates and destroys,
//    and a copyable view (Kernel) for the kernel handle an archive lends;
//  - kiln::Error thrown for every kiln_status other than KILN_OK, carrying the status and the
//    calling thread's message (kiln_last_error) read at the point of failure;
//  - std::string / std::vector in place of kiln.h's "size query, then fill" buffers.
// kiln.h's rules still hold and are not enforced here: a runtime must outlive every archive and
// package opened through it, an archive every Kernel taken from it, and an archive must not be
// destroyed while a launch through its kernels is in flight. Declaring owners in that order
// (runtime first) is enough, since C++ destroys them in reverse.
// .get() hands a handle to kiln.h's functions; .release() gives up ownership of it.
#ifndef KILN_KILN_HPP
#define KILN_KILN_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// The kiln.h beside this file, whatever the include path holds: the two are one release.
#include "kiln.h"

// Written for kiln.h 0.7.0. Within a major version kiln.h only adds functions and option fields
// (each marked with the minor version that added it), so a later 0.x keeps everything this face
// calls; an earlier one lacks some of it, and another major version may have changed it.
#define KILN_HPP_VERSION_NUMBER 700
#if !defined(KILN_VERSION_MAJOR) || !defined(KILN_VERSION_NUMBER)
#error "kiln.hpp needs kiln.h 0.7 or a later 0.x: this kiln.h has no KILN_VERSION_NUMBER"
#elif KILN_VERSION_MAJOR != 0 || KILN_VERSION_NUMBER < KILN_HPP_VERSION_NUMBER
#error "kiln.hpp was written for kiln.h 0.7 and works with 0.7 or a later 0.x; this kiln.h is another version"
#endif

namespace kiln {

// A failed kiln.h call: its status, and what libkiln said about it (which file, member, key or
// check failed). what() is the message, or the status's description where there was none.
class Error : public std::runtime_error {
 public:
  Error(kiln_status status, const std::string& message)
      : std::runtime_error(message.empty() ? std::string(kiln_status_string(status)) : message), status_(status) {}
  kiln_status status() const noexcept { return status_; }

 private:
  kiln_status status_;
};

inline unsigned version() noexcept { return kiln_version(); }  // of the library loaded, not of this header
inline std::string version_string() { return kiln_version_string(); }
inline const char* to_string(kiln_status status) noexcept { return kiln_status_string(status); }
inline const char* to_string(kiln_route route) noexcept { return kiln_route_string(route); }
inline const char* to_string(kiln_reason reason) noexcept { return kiln_reason_string(reason); }

// The calling thread's last error: the message of its most recent failed kiln.h call, "" after a
// success. Error already carries it; this is for a failure that returns no status (a NULL name).
inline std::string last_error() {
  std::size_t needed = 0;
  // Asking the size and then copying reads one message: kiln_last_error itself records nothing.
  kiln_last_error(nullptr, 0, &needed);
  if (needed <= 1) return std::string();
  std::string message(needed, '\0');
  if (kiln_last_error(message.data(), message.size(), &needed) != KILN_OK) return std::string();
  message.resize(needed - 1);
  return message;
}

namespace detail {

// Called straight after the failing call: the next kiln.h call on this thread replaces the message.
[[noreturn]] inline void throw_status(kiln_status status) { throw Error(status, last_error()); }

inline void check(kiln_status status) {
  if (status != KILN_OK) throw_status(status);
}

inline std::string borrowed(const char* text) { return text != nullptr ? std::string(text) : std::string(); }

// kiln.h's text buffers: asked for their size, then filled, again while the text has grown in
// between (counters and a runtime's last error move under other threads; a package may switch
// archives between the two calls).
template <typename Fill>
std::string fill_text(Fill fill) {
  std::string text;
  std::size_t needed = 0;
  kiln_status status = fill(nullptr, 0, &needed);
  while (status == KILN_ERR_BUFFER_TOO_SMALL) {
    if (needed <= text.size()) {
      throw Error(KILN_ERR_INTERNAL, "libkiln asked for a larger buffer without naming a larger size");
    }
    text.assign(needed, '\0');
    status = fill(text.data(), text.size(), &needed);
  }
  check(status);
  text.resize(needed > 0 && needed - 1 < text.size() ? needed - 1 : 0);
  return text;
}

template <typename T, void (*Destroy)(T*)>
class Owner {
 public:
  Owner() noexcept = default;
  explicit Owner(T* handle) noexcept : handle_(handle) {}
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  Owner(Owner&& other) noexcept : handle_(other.release()) {}
  Owner& operator=(Owner&& other) noexcept {
    reset(other.release());
    return *this;
  }
  ~Owner() { Destroy(handle_); }  // every kiln.h destroy function accepts NULL: a moved-from owner is one

  T* get() const noexcept { return handle_; }
  T* release() noexcept { return std::exchange(handle_, nullptr); }
  void reset(T* handle = nullptr) noexcept {
    T* old = std::exchange(handle_, handle);
    if (old != handle) Destroy(old);
  }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  T* handle_ = nullptr;
};

}  // namespace detail

// kiln_runtime_options, filled with libkiln's defaults by kiln_runtime_options_init. The strings
// are kept here, so the caller's may go; the C struct (c_options) points into this object.
// error_buffer is not offered: Runtime's constructor throws kiln_last_error's message instead.
class RuntimeOptions {
 public:
  RuntimeOptions() { detail::check(kiln_runtime_options_init(&options_, sizeof options_)); }

  RuntimeOptions& trust_path(std::string path) {
    trust_path_ = std::move(path);
    return *this;
  }
  RuntimeOptions& signature_threshold(std::uint32_t signers) {
    options_.signature_threshold = signers;
    return *this;
  }
  RuntimeOptions& policy(kiln_policy value) {
    options_.policy = static_cast<std::uint32_t>(value);
    return *this;
  }
  // `fn` runs on any thread and must not call back into the runtime that logs.
  RuntimeOptions& log(kiln_log_fn fn, void* user, kiln_log_level level = KILN_LOG_WARN) {
    options_.log_fn = fn;
    options_.log_user = user;
    options_.log_level = static_cast<std::uint32_t>(level);
    return *this;
  }
  RuntimeOptions& max_member_size(std::uint64_t bytes) {
    options_.max_member_size = bytes;
    return *this;
  }
  RuntimeOptions& cuda_driver_path(std::string path) {
    cuda_driver_path_ = std::move(path);
    return *this;
  }
  RuntimeOptions& diag_dir(std::string dir) {
    diag_dir_ = std::move(dir);
    return *this;
  }
  RuntimeOptions& hip_runtime_path(std::string path) {
    hip_runtime_path_ = std::move(path);
    return *this;
  }
  RuntimeOptions& attestation_trust_path(std::string path) {
    attestation_trust_path_ = std::move(path);
    return *this;
  }
  RuntimeOptions& attestation_threshold(std::uint32_t keys) {
    options_.attestation_threshold = keys;
    return *this;
  }

  // Valid while this object lives and is not changed.
  kiln_runtime_options c_options() const {
    kiln_runtime_options o = options_;
    if (trust_path_) o.trust_path = trust_path_->c_str();
    if (cuda_driver_path_) o.cuda_driver_path = cuda_driver_path_->c_str();
    if (diag_dir_) o.diag_dir = diag_dir_->c_str();
    if (hip_runtime_path_) o.hip_runtime_path = hip_runtime_path_->c_str();
    if (attestation_trust_path_) o.attestation_trust_path = attestation_trust_path_->c_str();
    return o;
  }

 private:
  kiln_runtime_options options_;
  std::optional<std::string> trust_path_, cuda_driver_path_, diag_dir_, hip_runtime_path_, attestation_trust_path_;
};

// A reference implementation as a C++ callable: the arguments of kiln_reference_cb less `user`.
// An exception it throws fails the launch with KILN_ERR_REFERENCE_FAILED and its what() as the
// launch's message, so none crosses into libkiln.
using ReferenceFunction = std::function<int(const kiln_call_info& info, void* const* args, std::size_t arg_count,
                                            void* stream)>;

namespace detail {

inline int call_reference(kiln_call_info* info, void** args, std::size_t arg_count, void* stream, void* user) {
  try {
    return (*static_cast<ReferenceFunction*>(user))(*info, args, arg_count, stream);
  } catch (const std::exception& e) {
    kiln_call_set_error(info, e.what());
  } catch (...) {
    kiln_call_set_error(info, "the reference threw an exception that is not a std::exception");
  }
  return -1;
}

inline void release_reference(void* user) { delete static_cast<ReferenceFunction*>(user); }

}  // namespace detail

class Runtime : public detail::Owner<kiln_runtime, &kiln_runtime_destroy> {
 public:
  using Owner::Owner;
  Runtime() noexcept = default;
  explicit Runtime(const RuntimeOptions& options) {
    const kiln_runtime_options o = options.c_options();
    kiln_runtime* runtime = nullptr;
    detail::check(kiln_runtime_create(&runtime, &o));
    reset(runtime);
  }

  // The latest failure on this runtime, of any thread where this one made none: for logs. A
  // failure of this thread's own is already in the Error it threw.
  std::string last_error() const {
    return detail::fill_text(
        [this](char* buffer, std::size_t capacity, std::size_t* needed) { return kiln_runtime_last_error(get(), buffer, capacity, needed); });
  }

  // `user` must stay valid until no launch can still use it; set_reference below manages that.
  void register_reference(const std::string& kernel, kiln_reference_fn fn, void* user) {
    detail::check(kiln_runtime_register_reference(get(), kernel.c_str(), fn, user));
  }
  void set_reference(const std::string& kernel, kiln_reference_cb fn, void* user, kiln_release_cb release_user) {
    detail::check(kiln_runtime_set_reference(get(), kernel.c_str(), fn, user, release_user));
  }
  // The callable is owned by libkiln from here on, and destroyed once it is replaced or removed
  // (or the runtime destroyed) and the last launch running it has returned.
  void set_reference(const std::string& kernel, ReferenceFunction fn) {
    if (!fn) {
      remove_reference(kernel);
      return;
    }
    auto owned = std::make_unique<ReferenceFunction>(std::move(fn));
    detail::check(kiln_runtime_set_reference(get(), kernel.c_str(), &detail::call_reference, owned.get(),
                                             &detail::release_reference));
    owned.release();  // on failure kiln.h leaves it the caller's: unique_ptr frees it then
  }
  void remove_reference(const std::string& kernel) {
    detail::check(kiln_runtime_set_reference(get(), kernel.c_str(), nullptr, nullptr, nullptr));
  }

  kiln_stats stats() const {
    kiln_stats stats;
    detail::check(kiln_stats_init(&stats, sizeof stats));
    detail::check(kiln_runtime_stats(get(), &stats));
    return stats;
  }
  std::string stats_prometheus() const {
    return detail::fill_text([this](char* buffer, std::size_t capacity, std::size_t* needed) {
      return kiln_runtime_stats_prometheus(get(), buffer, capacity, needed);
    });
  }
};

enum class Access : std::uint32_t { read = 0, write = 1, read_write = 2 };

// A parameter as the manifest declares it (kiln_param_info, with its name copied).
struct Param {
  std::string name;
  bool is_pointer = false;
  kiln_dtype dtype = KILN_DTYPE_I8;
  Access access = Access::read;  // pointers only
};

// A kernel resolved for one device, lent by its archive: a view, never destroyed, valid while
// the archive lives (moving the Archive owner keeps it valid: the handle is the same).
class Kernel {
 public:
  Kernel() noexcept = default;
  explicit Kernel(kiln_kernel* kernel) noexcept : kernel_(kernel) {}

  kiln_kernel* get() const noexcept { return kernel_; }
  explicit operator bool() const noexcept { return kernel_ != nullptr; }

  kiln_route route() const noexcept { return kiln_kernel_route(kernel_); }
  kiln_reason reason() const noexcept { return kiln_kernel_reason(kernel_); }
  std::string reason_text() const { return detail::borrowed(kiln_kernel_reason_text(kernel_)); }
  std::string target() const { return detail::borrowed(kiln_kernel_target(kernel_)); }
  std::string name() const { return detail::borrowed(kiln_kernel_name(kernel_)); }
  std::string archive_digest() const { return detail::borrowed(kiln_kernel_archive_digest(kernel_)); }
  std::string package() const { return detail::borrowed(kiln_kernel_package(kernel_)); }
  std::string revision() const { return detail::borrowed(kiln_kernel_revision(kernel_)); }
  std::size_t param_count() const noexcept { return kiln_kernel_param_count(kernel_); }

  Param param(std::size_t index) const {
    kiln_param_info info;
    detail::check(kiln_param_info_init(&info, sizeof info));
    detail::check(kiln_kernel_param(kernel_, index, &info));
    Param p;
    p.name = detail::borrowed(info.name);
    p.is_pointer = info.is_pointer != 0;
    p.dtype = static_cast<kiln_dtype>(info.dtype);
    p.access = static_cast<Access>(info.access);
    return p;
  }
  std::vector<Param> params() const {
    std::vector<Param> all;
    for (std::size_t i = 0, n = param_count(); i < n; ++i) all.push_back(param(i));
    return all;
  }

  // `args` holds one pointer per parameter, each at the parameter's value, as cuLaunchKernel
  // takes them. Returns the route the call took.
  kiln_route launch(void* const* args, std::size_t arg_count, void* stream = nullptr) const {
    kiln_route taken = KILN_ROUTE_REFUSED;
    detail::check(kiln_kernel_launch(kernel_, args, arg_count, stream, &taken));
    return taken;
  }
  kiln_route launch(std::initializer_list<void*> args, void* stream = nullptr) const {
    return launch(args.begin(), args.size(), stream);
  }
  template <std::size_t N>
  kiln_route launch(void* const (&args)[N], void* stream = nullptr) const {
    return launch(args, N, stream);
  }
  kiln_route launch_checked(void* const* args, const std::size_t* arg_sizes, std::size_t arg_count,
                            void* stream = nullptr) const {
    kiln_route taken = KILN_ROUTE_REFUSED;
    detail::check(kiln_kernel_launch_checked(kernel_, args, arg_sizes, arg_count, stream, &taken));
    return taken;
  }

  std::string explain(void* const* args, std::size_t arg_count) const {
    return detail::fill_text([&](char* buffer, std::size_t capacity, std::size_t* needed) {
      return kiln_kernel_explain(kernel_, args, arg_count, buffer, capacity, needed);
    });
  }
  std::string explain(std::initializer_list<void*> args) const { return explain(args.begin(), args.size()); }

 private:
  kiln_kernel* kernel_ = nullptr;
};

class Archive : public detail::Owner<kiln_archive, &kiln_archive_destroy> {
 public:
  using Owner::Owner;
  Archive() noexcept = default;
  Archive(Runtime& runtime, const std::string& path) {
    kiln_archive* archive = nullptr;
    detail::check(kiln_archive_open(runtime.get(), path.c_str(), &archive));
    reset(archive);
  }
  // The bytes are copied: the caller may free them on return.
  static Archive from_memory(Runtime& runtime, const void* data, std::size_t size) {
    kiln_archive* archive = nullptr;
    detail::check(kiln_archive_open_memory(runtime.get(), data, size, &archive));
    return Archive(archive);
  }

  std::string digest() const { return detail::borrowed(kiln_archive_digest(get())); }
  std::string package() const { return detail::borrowed(kiln_archive_package(get())); }
  std::string revision() const { return detail::borrowed(kiln_archive_revision(get())); }
  std::uint64_t sequence() const noexcept { return kiln_archive_sequence(get()); }
  std::size_t kernel_count() const noexcept { return kiln_archive_kernel_count(get()); }
  // kiln_archive_kernel_name returns no status: an index past the end is std::out_of_range.
  std::string kernel_name(std::size_t index) const {
    const char* name = kiln_archive_kernel_name(get(), index);
    if (name == nullptr) throw std::out_of_range("kiln::Archive::kernel_name: no kernel " + std::to_string(index));
    return name;
  }
  std::vector<std::string> kernel_names() const {
    std::vector<std::string> names;
    for (std::size_t i = 0, n = kernel_count(); i < n; ++i) names.push_back(kernel_name(i));
    return names;
  }

  // A reference or refused route is not an error here: read the Kernel's route and reason.
  Kernel kernel(const std::string& name, int device = 0) const {
    kiln_kernel* found = nullptr;
    detail::check(kiln_archive_get_kernel(get(), name.c_str(), device, &found));
    return Kernel(found);
  }
  void warm(int device = 0) const { detail::check(kiln_archive_warm(get(), device)); }
  void add_attestation(const void* envelope, std::size_t size) const {
    detail::check(kiln_archive_add_attestation(get(), envelope, size));
  }

  // JSON reports (kiln.h documents their fields).
  std::string preflight(int device = 0) const {
    return detail::fill_text([&](char* buffer, std::size_t capacity, std::size_t* needed) {
      return kiln_archive_preflight(get(), device, buffer, capacity, needed);
    });
  }
  // An empty `driver` judges as if the driver were new enough for every code object.
  std::string preflight_target(const std::string& target, const std::string& driver = std::string()) const {
    return detail::fill_text([&](char* buffer, std::size_t capacity, std::size_t* needed) {
      return kiln_archive_preflight_target(get(), target.c_str(), driver.c_str(), buffer, capacity, needed);
    });
  }

  // A member's verified content. Its size comes from the signed index, so the size query reads
  // nothing and the fill is sized once.
  std::vector<std::uint8_t> read_member(const std::string& path) const { return read_member_into<std::vector<std::uint8_t>>(path); }
  std::string read_member_text(const std::string& path) const { return read_member_into<std::string>(path); }

 private:
  template <typename Bytes>
  Bytes read_member_into(const std::string& path) const {
    Bytes content;
    std::size_t size = 0;
    // An empty member fits the empty buffer of the size query: KILN_OK at once.
    kiln_status status = kiln_archive_read_member(get(), path.c_str(), nullptr, 0, &size);
    while (status == KILN_ERR_BUFFER_TOO_SMALL) {
      if (size <= content.size()) {
        throw Error(KILN_ERR_INTERNAL, "libkiln asked for a larger buffer without naming a larger size");
      }
      content.resize(size);
      status = kiln_archive_read_member(get(), path.c_str(), content.data(), content.size(), &size);
    }
    detail::check(status);
    content.resize(size);
    return content;
  }
};

// The active archive of one package in a kiln store, warmed for one device and swapped on reload.
class Package : public detail::Owner<kiln_package, &kiln_package_destroy> {
 public:
  using Owner::Owner;
  Package() noexcept = default;
  // `witness_head`: a head from `kiln store head PACKAGE` kept outside the store; empty for none.
  Package(Runtime& runtime, const std::string& store_dir, const std::string& package, int device,
          const std::string& witness_head = std::string()) {
    kiln_package* opened = nullptr;
    detail::check(kiln_package_open_witnessed(runtime.get(), store_dir.c_str(), package.c_str(), device,
                                              witness_head.c_str(), &opened));
    reset(opened);
  }

  // True when the store named another archive and it is now the one in use.
  bool reload() const {
    int switched = 0;
    detail::check(kiln_package_reload(get(), &switched));
    return switched != 0;
  }
  std::string digest() const {
    return detail::fill_text([this](char* buffer, std::size_t capacity, std::size_t* needed) {
      return kiln_package_active_digest(get(), buffer, capacity, needed);
    });
  }
  kiln_route launch(const std::string& kernel, void* const* args, std::size_t arg_count, void* stream = nullptr) const {
    kiln_route taken = KILN_ROUTE_REFUSED;
    detail::check(kiln_package_launch(get(), kernel.c_str(), args, arg_count, stream, &taken));
    return taken;
  }
  kiln_route launch(const std::string& kernel, std::initializer_list<void*> args, void* stream = nullptr) const {
    return launch(kernel, args.begin(), args.size(), stream);
  }
};

}  // namespace kiln

#endif  // KILN_KILN_HPP
