// What an AMD device can launch beyond a kernel's code: kiln launches tensor maps, clusters and
// scratch memory only through CUDA, so a kernel that needs any of them is refused on an AMD
// device when it is resolved (routed to its reference with the reason), never at launch. The
// twin of cuda_features; a pure function, tested without a device.
#pragma once

#include <string>

#include "backend/backend.hpp"
#include "core/manifest.hpp"

namespace kiln::hip {

// "" when `device` can launch the kernel, else why not.
std::string feature_problem(const backend::DeviceInfo& device, const KernelSpec& kernel);

}  // namespace kiln::hip
