#include "cuda/cuda_features.hpp"

#include "core/launch_features.hpp"

namespace kiln::cuda {

std::string feature_problem(const KernelSpec& kernel, const DeviceSpec& device, const DriverFeatures& driver,
                            const std::string& device_text) {
  LaunchFeatures f = launch_features(kernel);
  const std::string cc = std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor);
  const std::string who = "kernel '" + kernel.name + "' ";
  const std::string driver_text = "the CUDA " + driver_version_text(device.driver_version) + " driver";
  // Both tensor maps (TMA) and thread block clusters arrived with Hopper, compute capability 9.0.
  if ((f.tensor_map || f.cluster) && device.cc_major < 9) {
    return who + (f.tensor_map ? "passes " : "launches ") + describe_first_feature(LaunchFeatures{f.tensor_map, nullptr, f.cluster}) +
           ", which needs compute capability 9.0; " + device_text + " is cc " + cc;
  }
  if (f.tensor_map && !driver.tensor_map_encode) {
    return who + "passes " + describe_first_feature(LaunchFeatures{f.tensor_map, nullptr, nullptr}) + " but " + driver_text +
           " lacks cuTensorMapEncodeTiled (CUDA 12.0+)";
  }
  if (f.cluster && !driver.launch_ex) {
    return who + "launches " + describe_first_feature(LaunchFeatures{nullptr, nullptr, f.cluster}) + " but " + driver_text +
           " lacks cuLaunchKernelEx (CUDA 12.0+)";
  }
  if (f.scratch && !driver.memory) {
    return who + "needs " + describe_first_feature(LaunchFeatures{nullptr, f.scratch, nullptr}) + " but " + driver_text +
           " lacks cuMemAlloc_v2/cuMemFree_v2";
  }
  return "";
}

}  // namespace kiln::cuda
