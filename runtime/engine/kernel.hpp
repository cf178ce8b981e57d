// struct kiln_kernel: one kernel of one archive resolved for one device: its route, why,
// the loaded code when it runs natively, and the launch path.
#pragma once

#include <string>

#include "cuda_backend.hpp"
#include "hip_backend.hpp"
#include "kiln/kiln.h"
#include "manifest.hpp"
#include "shape_match.hpp"

struct kiln_archive;

struct kiln_kernel {
  kiln_archive* archive = nullptr;
  kiln::KernelSpec spec;               // decoded from the archive's kernel table
  int device = 0;
  kiln_route route = KILN_ROUTE_REFUSED;
  kiln_reason reason = KILN_REASON_ARCH_MISMATCH;
  std::string reason_text;
  std::string target;                 // the chosen code object's target, or ""
  bool reference_allowed = false;     // runtime policy and the kernel's `fallback` both allow it
  const kiln::cuda::Device* cuda_device = nullptr;
  kiln::cuda::LoadedCode code;
  const kiln::hip::Device* hip_device = nullptr;  // the HIP twin of cuda_device and code
  kiln::hip::LoadedCode hip_code;
  kiln::engine::ShapeTable shapes;

  // The launch path; throws kiln::Error, which the C boundary turns into a status.
  kiln_route launch(void* const* args, std::size_t arg_count, void* stream);

 private:
  kiln_route run_reference(kiln_reason why, const std::string& why_text, void* const* args, std::size_t arg_count,
                           void* stream);
};
