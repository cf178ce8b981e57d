#include "hip/hip_features.hpp"

#include "core/launch_features.hpp"

namespace kiln::hip {

std::string feature_problem(const backend::DeviceInfo& device, const KernelSpec& kernel) {
  LaunchFeatures f = launch_features(kernel);
  if (!f.any()) return "";
  return "kernel '" + kernel.name + "' needs " + describe_first_feature(f) + ", which kiln launches only through CUDA; " +
         device.describe + " is an AMD device";
}

}  // namespace kiln::hip
