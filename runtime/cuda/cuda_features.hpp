// Whether a CUDA device and driver can launch what a kernel needs beyond its code: tensor maps
// (cuTensorMapEncodeTiled, compute capability 9.0+), clusters (cuLaunchKernelEx, 9.0+) and
// scratch memory (cuMemAlloc). Decided when the kernel is resolved, so that a device without
// them routes the kernel to its reference with the reason instead of failing a launch. A pure
// function of what the driver and device report, tested without either.
#pragma once

#include <string>

#include "core/manifest.hpp"
#include "cuda/cuda_target.hpp"

namespace kiln::cuda {

struct DriverFeatures {
  bool launch_ex = false;           // cuLaunchKernelEx
  bool tensor_map_encode = false;   // cuTensorMapEncodeTiled
  bool memory = false;              // cuMemAlloc and cuMemFree
};

// "" when `device` (described as `device_text`) can launch the kernel, else why not.
std::string feature_problem(const KernelSpec& kernel, const DeviceSpec& device, const DriverFeatures& driver,
                            const std::string& device_text);

}  // namespace kiln::cuda
