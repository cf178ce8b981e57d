// engine::Kernel: one kernel of one archive resolved for one device: its route, why,
// the loaded code when it runs natively, and the launch path.
#pragma once

#include <memory>
#include <string>

#include "backend.hpp"
#include "kiln/kiln.h"
#include "manifest.hpp"
#include "shape_match.hpp"

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

// Engine-internal (the C API hands it out as the opaque kiln_kernel): resolve.cpp settles its
// fields once, under its archive's per-kernel lock, and they are only read afterwards.
struct Kernel {
  Archive* archive = nullptr;
  kiln::KernelSpec spec;               // decoded from the archive's kernel table
  int device = 0;
  kiln_route route = KILN_ROUTE_REFUSED;
  kiln_reason reason = KILN_REASON_ARCH_MISMATCH;
  std::string reason_text;
  std::string target;                 // the chosen code object's target, or ""
  bool reference_allowed = false;     // runtime policy and the kernel's `fallback` both allow it
  // Where the code runs, when it does: the backend that loaded it, its device, the code.
  kiln::engine::Backend* backend = nullptr;
  const kiln::engine::DeviceInfo* device_info = nullptr;  // also set when a load failed (diagnostics)
  std::unique_ptr<kiln::engine::Code> code;
  kiln::engine::ShapeTable shapes;

  // The launch path; throws kiln::Error, which the C boundary turns into a status.
  // `arg_sizes` (may be null) holds each argument's size in bytes, checked against the manifest.
  kiln_route launch(void* const* args, std::size_t arg_count, void* stream, const std::size_t* arg_sizes = nullptr);

 private:
  void check_arguments(void* const* args, std::size_t arg_count, const std::size_t* arg_sizes) const;
  std::string undeclared_shape_text(void* const* args) const;
  kiln_route run_reference(kiln_reason why, const std::string& why_text, void* const* args, std::size_t arg_count,
                           void* stream);
};

}  // namespace kiln::engine
