// backend::DeviceTools for an AMD device: memory, synchronous copies and event timing with the
// device made current for each call (DeviceScope), for tools that run code on the device
// themselves (kiln verify --run). The twin of cuda_tools; its runtime calls are optional ones
// (HipApi::has_tools): libkiln serves without them.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hip/hip_backend.hpp"
#include "hip/hip_driver.hpp"

namespace kiln::hip {
namespace {

void* pointer(std::uint64_t address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

class HipTools final : public backend::DeviceTools {
 public:
  HipTools(const HipApi& api, int ordinal) : api_(api), ordinal_(ordinal) {}

  int allocate(std::uint64_t bytes, std::uint64_t* address) override {
    DeviceScope scope(api_, ordinal_);
    if (scope.status() != 0) return scope.status();
    void* p = nullptr;
    int r = api_.hipMalloc(&p, static_cast<std::size_t>(bytes));
    *address = r == 0 ? static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)) : 0;
    return r;
  }
  int release(std::uint64_t address) override {
    DeviceScope scope(api_, ordinal_);
    return scope.status() != 0 ? scope.status() : api_.hipFree(pointer(address));
  }
  int fill(std::uint64_t address, std::uint8_t byte, std::uint64_t bytes) override {
    DeviceScope scope(api_, ordinal_);
    return scope.status() != 0 ? scope.status() : api_.hipMemset(pointer(address), byte, static_cast<std::size_t>(bytes));
  }
  int write(std::uint64_t address, const void* data, std::uint64_t bytes) override {
    DeviceScope scope(api_, ordinal_);
    if (scope.status() != 0) return scope.status();
    return api_.hipMemcpyHtoD(pointer(address), const_cast<void*>(data), static_cast<std::size_t>(bytes));
  }
  int read(void* data, std::uint64_t address, std::uint64_t bytes) override {
    DeviceScope scope(api_, ordinal_);
    return scope.status() != 0 ? scope.status() : api_.hipMemcpyDtoH(data, pointer(address), static_cast<std::size_t>(bytes));
  }
  int synchronize() override {
    DeviceScope scope(api_, ordinal_);
    return scope.status() != 0 ? scope.status() : api_.hipDeviceSynchronize();
  }
  int time(const std::function<void()>& launch_once, unsigned repeats, std::vector<double>* microseconds) override {
    DeviceScope scope(api_, ordinal_);
    if (scope.status() != 0) return scope.status();
    Events events(api_);
    if (int r = events.create(); r != 0) return r;
    for (unsigned i = 0; i < repeats; ++i) {
      if (int r = api_.hipEventRecord(events.start, nullptr); r != 0) return r;
      launch_once();
      if (int r = api_.hipEventRecord(events.stop, nullptr); r != 0) return r;
      if (int r = api_.hipEventSynchronize(events.stop); r != 0) return r;
      float ms = 0;
      if (int r = api_.hipEventElapsedTime(&ms, events.start, events.stop); r != 0) return r;
      microseconds->push_back(static_cast<double>(ms) * 1000.0);
    }
    return 0;
  }
  std::uint64_t total_memory() override {
    std::size_t bytes = 0;
    if (api_.hipDeviceTotalMem == nullptr || api_.hipDeviceTotalMem(&bytes, ordinal_) != 0) return 0;
    return bytes;
  }

 private:
  // Two events, destroyed on every path (a launch that throws included).
  struct Events {
    explicit Events(const HipApi& a) : api(a) {}
    ~Events() {
      if (start != nullptr) api.hipEventDestroy(start);
      if (stop != nullptr) api.hipEventDestroy(stop);
    }
    int create() {
      int r = api.hipEventCreate(&start);
      return r != 0 ? r : api.hipEventCreate(&stop);
    }
    const HipApi& api;
    void* start = nullptr;
    void* stop = nullptr;
  };

  const HipApi& api_;
  int ordinal_;
};

}  // namespace

std::unique_ptr<backend::DeviceTools> HipBackend::tools(const backend::DeviceInfo& device, std::string* why) {
  const HipApi* api = api_.load(std::memory_order_acquire);
  if (api == nullptr || !api->has_tools()) {
    *why = "the HIP runtime lacks the memory and event calls device tools need (hipMalloc, hipEventRecord, ...); "
           "libkiln serves kernels without them";
    return nullptr;
  }
  return std::make_unique<HipTools>(*api, device.ordinal);
}

}  // namespace kiln::hip
