// A GPU described rather than present, for `kiln preflight --target` and
// kiln_archive_preflight_target: "sm_80" (a CUDA device of compute capability 8.0; an a/f
// suffix names code, not devices, and is accepted and ignored) with an optional CUDA driver
// version, or an AMD target ID ("gfx942", "gfx90a:xnack-"). Its backends judge code exactly as
// the driver-backed ones do (the same judge_tag, requirement and feature rules); where those
// would load the code, they re-read the verified code object's header instead, so the route
// they report is the one a real device of that kind gets unless its driver then refuses the
// code (a bad symbol, a corrupt image: only the device can tell).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "cuda/cuda_target.hpp"
#include "hip/hip_target.hpp"

namespace kiln::engine {

struct DescribedTarget {
  std::string text;         // as given: "sm_90a", "gfx90a:xnack-"
  format::Vendor vendor = format::Vendor::none;  // cuda or hip
  cuda::DeviceSpec spec;    // CUDA: cc and driver (driver_version 0: not given)
  hip::TargetId amd;        // AMD: the device's target ID
};

// Parses a target and an optional CUDA driver version ("12.4"; "" for none, which judges as if
// the driver were new enough for every code object). Throws kiln::Failure (invalid_argument)
// naming what is wrong.
DescribedTarget parse_described_target(const std::string& text, const std::string& driver);

// A vendor's backend for a described target of that vendor: it judges code against the target
// and "loads" nothing (LoadOutcome::simulated). engine/backends.cpp lists them.
std::unique_ptr<backend::Backend> described_cuda(const DescribedTarget& target);
std::unique_ptr<backend::Backend> described_hip(const DescribedTarget& target);
// A vendor's backend with no device, every query answered with `why`.
std::unique_ptr<backend::Backend> described_without_device(format::Vendor vendor, const std::string& why);

}  // namespace kiln::engine
