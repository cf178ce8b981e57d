// backend::DeviceTools for a CUDA device: memory, synchronous copies and event timing in the
// device's primary context, for tools that run code on the device themselves (kiln verify --run).
// The driver calls are optional ones (DriverApi::has_tools): libkiln serves without them.
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"

namespace kiln::cuda {
namespace {

class CudaTools final : public backend::DeviceTools {
 public:
  CudaTools(const DriverApi& api, const Device& device) : api_(api), device_(device) {}

  int allocate(std::uint64_t bytes, std::uint64_t* address) override {
    ContextScope scope(api_, device_.primary);
    CUdeviceptr p = 0;
    CUresult r = api_.cuMemAlloc(&p, static_cast<std::size_t>(bytes));
    *address = r == CUDA_SUCCESS ? static_cast<std::uint64_t>(p) : 0;
    return r;
  }
  int release(std::uint64_t address) override {
    ContextScope scope(api_, device_.primary);
    return api_.cuMemFree(static_cast<CUdeviceptr>(address));
  }
  int fill(std::uint64_t address, std::uint8_t byte, std::uint64_t bytes) override {
    ContextScope scope(api_, device_.primary);
    return api_.cuMemsetD8(static_cast<CUdeviceptr>(address), byte, static_cast<std::size_t>(bytes));
  }
  int write(std::uint64_t address, const void* data, std::uint64_t bytes) override {
    ContextScope scope(api_, device_.primary);
    return api_.cuMemcpyHtoD(static_cast<CUdeviceptr>(address), data, static_cast<std::size_t>(bytes));
  }
  int read(void* data, std::uint64_t address, std::uint64_t bytes) override {
    ContextScope scope(api_, device_.primary);
    return api_.cuMemcpyDtoH(data, static_cast<CUdeviceptr>(address), static_cast<std::size_t>(bytes));
  }
  int synchronize() override {
    ContextScope scope(api_, device_.primary);
    return api_.cuCtxSynchronize();
  }
  int time(const std::function<void()>& launch_once, unsigned repeats, std::vector<double>* microseconds) override {
    ContextScope scope(api_, device_.primary);
    Events events(api_);
    if (CUresult r = events.create(); r != CUDA_SUCCESS) return r;
    for (unsigned i = 0; i < repeats; ++i) {
      if (CUresult r = api_.cuEventRecord(events.start, nullptr); r != CUDA_SUCCESS) return r;
      launch_once();
      if (CUresult r = api_.cuEventRecord(events.stop, nullptr); r != CUDA_SUCCESS) return r;
      if (CUresult r = api_.cuEventSynchronize(events.stop); r != CUDA_SUCCESS) return r;
      float ms = 0;
      if (CUresult r = api_.cuEventElapsedTime(&ms, events.start, events.stop); r != CUDA_SUCCESS) return r;
      microseconds->push_back(static_cast<double>(ms) * 1000.0);
    }
    return CUDA_SUCCESS;
  }
  std::uint64_t total_memory() override {
    std::size_t bytes = 0;
    if (api_.cuDeviceTotalMem == nullptr || api_.cuDeviceTotalMem(&bytes, device_.handle) != CUDA_SUCCESS) return 0;
    return bytes;
  }

 private:
  // Two events, destroyed on every path (a launch that throws included).
  struct Events {
    explicit Events(const DriverApi& a) : api(a) {}
    ~Events() {
      if (start != nullptr) api.cuEventDestroy(start);
      if (stop != nullptr) api.cuEventDestroy(stop);
    }
    CUresult create() {
      CUresult r = api.cuEventCreate(&start, CU_EVENT_DEFAULT);
      return r != CUDA_SUCCESS ? r : api.cuEventCreate(&stop, CU_EVENT_DEFAULT);
    }
    const DriverApi& api;
    CUevent start = nullptr, stop = nullptr;
  };

  const DriverApi& api_;
  const Device& device_;
};

}  // namespace

std::unique_ptr<backend::DeviceTools> CudaBackend::tools(const backend::DeviceInfo& device, std::string* why) {
  const Driver* d = driver();
  if (d == nullptr || !d->api().has_tools()) {
    *why = "the CUDA driver lacks the memory and event calls device tools need (cuMemAlloc, cuEventRecord, ...); "
           "libkiln serves kernels without them";
    return nullptr;
  }
  return std::make_unique<CudaTools>(d->api(), device_of(device));
}

}  // namespace kiln::cuda
