#include "engine/backends.hpp"

#include "cuda/cuda_backend.hpp"
#include "hip/hip_backend.hpp"

namespace kiln::engine {
namespace {

struct Vendor {
  format::Vendor id;
  const char* gpus;  // "an NVIDIA GPU": what a described target of this vendor is, in reasons
  std::unique_ptr<backend::Backend> (*for_devices)(const kiln_runtime_options& options);
  std::unique_ptr<backend::Backend> (*for_target)(const DescribedTarget& target);
};

// In the order a kernel with code for several vendors (backend "any") tries them.
const Vendor kVendors[] = {
    {format::Vendor::cuda, "an NVIDIA GPU",
     [](const kiln_runtime_options& o) -> std::unique_ptr<backend::Backend> {
       return std::make_unique<cuda::CudaBackend>(o.cuda_driver_path != nullptr ? o.cuda_driver_path : "");
     },
     described_cuda},
    {format::Vendor::hip, "an AMD GPU",
     [](const kiln_runtime_options& o) -> std::unique_ptr<backend::Backend> {
       return std::make_unique<hip::HipBackend>(o.hip_runtime_path != nullptr ? o.hip_runtime_path : "");
     },
     described_hip},
};

}  // namespace

backend::BackendList device_backends(const kiln_runtime_options& options) {
  backend::BackendList list;
  for (const Vendor& v : kVendors) list.push_back(v.for_devices(options));
  return list;
}

backend::BackendList described_backends(const DescribedTarget& target) {
  const Vendor* own = nullptr;
  for (const Vendor& v : kVendors) {
    if (v.id == target.vendor) own = &v;
  }
  backend::BackendList list;
  for (const Vendor& v : kVendors) {
    list.push_back(&v == own ? v.for_target(target)
                             : described_without_device(v.id, "target " + target.text + " is " + (own ? own->gpus : "another GPU")));
  }
  return list;
}

backend::Backend* find_backend(const backend::BackendList& list, format::Vendor vendor) {
  for (const auto& b : list) {
    if (b->format_vendor() == vendor) return b.get();
  }
  return nullptr;
}

}  // namespace kiln::engine
