// engine::Kernel: one kernel of one archive resolved for one device: its route, why,
// the loaded code when it runs natively, and the launch path.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "core/manifest.hpp"
#include "engine/kernel_abi.hpp"
#include "engine/shape_match.hpp"
#include "engine/variant_choice.hpp"
#include "kiln/kiln.h"

namespace kiln::engine {

class Archive;

// What a reference is handed as its kiln_call_info, and what kiln_call_set_error writes. The
// call running on this thread is known (current()), so an info pointer is recognised by
// address alone: nothing is read through a pointer libkiln did not make.
struct CallContext {
  kiln_call_info info{};
  std::string error;  // the reference's own message, if it set one
  static CallContext* current();  // the innermost reference call on this thread, or null
};

// One kernel of one archive resolved for one device. The C API hands it out as the opaque
// kiln_kernel. Its Archive settles the route once, under that archive's per-kernel lock
// (resolve.cpp, the one friend); afterwards it is only read, so readers need no lock.
class Kernel {
 public:
  Kernel(Archive& archive, kiln::KernelSpec spec, int device, bool reference_allowed);

  Archive& archive() const { return *archive_; }
  const kiln::KernelSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  int device() const { return device_; }
  kiln_route route() const { return route_; }
  bool runs_on_device() const { return route_ == KILN_ROUTE_NATIVE || route_ == KILN_ROUTE_PTX_JIT; }
  kiln_reason reason() const { return reason_; }
  const std::string& reason_text() const { return reason_text_; }
  const std::string& target() const { return target_; }  // the chosen code object's target, or ""
  // The member a call runs: the kernel's own code object (variant -1) or variant i's; "" when
  // the kernel does not run on the device (or that variant's code did not load).
  const std::string& code_path(int variant = -1) const;
  // The device the kernel was judged against: set when its backend found one, also when no
  // code fitted or a load failed (diagnostics name it); null when there was no device.
  const kiln::backend::DeviceInfo* device_info() const { return device_info_; }
  // The backend that found that device (null when none did): device tools come from it.
  kiln::backend::Backend* device_backend() const { return device_backend_; }

  // The variant a call takes on this device: the first whose conditions hold and whose code is
  // loaded; -1 for the kernel's own code (also when it does not run here).
  int variant_for(void* const* args) const;
  // What a call would do, in words: its shape and launch, the variant it takes and why the
  // variants before it do not, or the route and reason when it does not run natively.
  // Checks the arguments as a launch does (throws kiln::Failure); launches nothing.
  std::string explain_call(void* const* args, std::size_t arg_count) const;

  // The launch path; throws kiln::Failure, which the C boundary turns into a status.
  // `arg_sizes` (may be null) holds each argument's size in bytes, checked against the manifest.
  kiln_route launch(void* const* args, std::size_t arg_count, void* stream, const std::size_t* arg_sizes = nullptr);

 private:
  friend class Archive;  // resolve.cpp settles the fields below, once

  void check_arguments(void* const* args, std::size_t arg_count, const std::size_t* arg_sizes) const;
  std::string undeclared_shape_text(void* const* args) const;
  kiln_route run_reference(kiln_reason why, const std::string& why_text, void* const* args, std::size_t arg_count,
                           void* stream);

  Archive* archive_;
  kiln::KernelSpec spec_;  // decoded from the archive's kernel table
  int device_;
  bool reference_allowed_;  // runtime policy and the kernel's `fallback` both allow it
  kiln::engine::ShapeTable shapes_;
  kiln::engine::KernelAbi abi_;  // the kernel's own parameters, when they are not the call's
  kiln_route route_ = KILN_ROUTE_REFUSED;
  kiln_reason reason_ = KILN_REASON_ARCH_MISMATCH;
  std::string reason_text_;
  std::string target_;
  // Where the code runs, when it does: the backend that loaded it, its device, the code.
  kiln::backend::Backend* backend_ = nullptr;
  const kiln::backend::DeviceInfo* device_info_ = nullptr;
  kiln::backend::Backend* device_backend_ = nullptr;
  std::unique_ptr<kiln::backend::Code> code_;
  std::string code_path_;
  // The variants (kiln.toml [[kernel.variant]]), loaded for the target code_ was chosen for;
  // a null entry failed to load, and its calls take code_ (which assumes less).
  kiln::engine::VariantChoice variants_;
  std::vector<std::unique_ptr<kiln::backend::Code>> variant_code_;
  std::vector<std::string> variant_paths_;  // per variant, where its code loaded
  // Planning a sparse pull (Archive::code_for_target): absent code is judged on its index entry
  // as if present, and what the route would read is listed in planned_ (code that must be read
  // to be judged included), instead of being read.
  bool planning_ = false;
  std::vector<std::size_t> planned_;
  // Per variant, its own parameter list when it has one (null: the kernel's, abi_).
  std::vector<std::unique_ptr<kiln::engine::KernelAbi>> variant_abi_;
};

}  // namespace kiln::engine
