// The CUDA backend (backend/backend.hpp): the driver's devices, kiln's CUDA matching rules
// (cuda_target), loading a verified code object for a device, and launching it. The HIP
// backend (runtime/hip) is its twin.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "core/bytes.hpp"
#include "core/kernel_table.hpp"
#include "core/launch_config.hpp"
#include "cuda/cuda_driver.hpp"
#include "cuda/cuda_target.hpp"

namespace kiln::cuda {

using backend::Unavailable;

// The scratch memory of one device (MANIFEST.md, scratch): a buffer per stream and scratch slot,
// grown when a launch needs more. A smaller buffer is retired, not freed, since launches queued
// on the stream may still use it; everything is freed with the backend.
struct ScratchPool {
  struct Buffer {
    CUdeviceptr address = 0;
    std::uint64_t size = 0;
  };
  std::mutex mutex;
  std::map<std::pair<void*, std::size_t>, Buffer> buffers;
  std::vector<CUdeviceptr> retired;
};

struct Device {
  backend::DeviceInfo info;     // what the engine, reasons and logs see of it
  int ordinal = 0;
  CUdevice handle = 0;
  CUcontext primary = nullptr;  // retained for the backend's lifetime
  DeviceSpec spec;
  std::string name;             // "NVIDIA H200"
  std::string describe() const; // "device 0 'NVIDIA H200' (cc 9.0, driver 13.0)"
  mutable ScratchPool scratch;
};

// A CUfunction that threads may fill in at once and read without a lock; a copy takes the value,
// so that LoadedCode stays a plain value.
struct SharedFunction {
  SharedFunction() = default;
  SharedFunction(const SharedFunction& other) : value(other.value.load(std::memory_order_acquire)) {}
  SharedFunction& operator=(const SharedFunction& other) {
    value.store(other.value.load(std::memory_order_acquire), std::memory_order_release);
    return *this;
  }
  mutable std::atomic<CUfunction> value{nullptr};
};

struct LoadedCode {
  CUlibrary library = nullptr;  // cuLibraryLoadData path (context-independent)
  CUkernel kernel = nullptr;
  CUmodule module = nullptr;    // cuModuleLoadDataEx path (older drivers)
  CUfunction function = nullptr;  // the module's
  unsigned max_dynamic_smem = 0;  // the grant made at load
  // Library path: what launches on the primary context's own streams pass to the driver, found
  // at the first of them (cuda_backend.cpp, primary_context_handle); null until then.
  SharedFunction primary_handle;
  bool loaded() const { return kernel != nullptr || function != nullptr; }
};

struct LoadResult {
  bool ok = false;
  LoadedCode code;
  std::string error;   // the driver's error and, for PTX, its JIT error log
  CUresult cuda_error = CUDA_SUCCESS;
  std::uint64_t nanoseconds = 0;
};

using LaunchConfig = kiln::LaunchConfig;  // the same for every backend

// kiln's verdict on one target tag for a device of `spec` (the body of every CUDA backend's
// judge: the driver's and a described target's, kiln preflight --target); `path` names the
// member where its content is read (a PTX member's ISA version).
backend::TagFit judge_tag(const DeviceSpec& spec, const std::string& tag, format::CodeKind kind, ByteView content,
                          const std::string& path);

// How reasons and launch errors name this vendor (its backend and its described targets' alike).
inline constexpr const char* kVendorName = "CUDA";
inline constexpr const char* kLaunchCall = "cuLaunchKernel";

class CudaBackend final : public backend::Backend {
 public:
  explicit CudaBackend(std::string driver_path) : driver_path_(std::move(driver_path)) {}
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // backend::Backend
  const char* vendor() const override { return kVendorName; }
  format::Vendor format_vendor() const override { return format::Vendor::cuda; }
  const char* launch_call() const override { return kLaunchCall; }
  const backend::DeviceInfo* device(int ordinal, kiln_reason* reason, std::string* why) override;
  std::string unmet_requirement(const backend::DeviceInfo& device, const KernelTable& table) override;
  std::string unmet_feature(const backend::DeviceInfo& device, const KernelSpec& kernel) override;
  backend::TagFit judge(const backend::DeviceInfo& device, const std::string& tag, format::CodeKind kind,
                        ByteView content, const std::string& path) override;
  backend::LoadOutcome load(const backend::DeviceInfo& device, ByteView image, format::CodeKind kind,
                            const std::string& entry, unsigned max_dynamic_smem) override;
  std::string describe_error(int error) const override;
  // Memory, copies and event timing in the device's primary context (cuda_tools.cpp).
  std::unique_ptr<backend::DeviceTools> tools(const backend::DeviceInfo& device, std::string* why) override;

  // The driver and a device of it, for kiln's own tools (verify --run allocates and times on the
  // device's primary context). Queried once per ordinal, then cached; thread-safe.
  const Device* native_device(int ordinal, Unavailable* kind, std::string* why);
  const Driver* driver() const { return driver_.load(std::memory_order_acquire); }

  // What loaded code does (backend::CodeOn): launches on `stream` in the device's primary context
  // (made current for the call if the calling thread has another one current), encodes a tensor
  // map (cuTensorMapEncodeTiled, a host-side call), hands out scratch memory for `slot` of
  // launches on `stream` (at least `bytes`, aligned to `align`), and unloads.
  CUresult launch(const Device& device, const LoadedCode& code, const LaunchConfig& config, void* stream,
                  void** args) const;
  CUresult encode_tensor_map(const Device& device, const TensorMapRequest& request, void* out) const;
  CUresult scratch(const Device& device, std::size_t slot, std::uint64_t bytes, std::uint32_t align, void* stream,
                   std::uint64_t* address) const;
  void unload(LoadedCode& code);

 private:
  // The device a DeviceInfo this backend made describes (its `native` record).
  const Device& device_of(const backend::DeviceInfo& info);
  // Loads a verified image (a cubin, fatbin, or NUL-terminated PTX) and finds `entry` in it.
  // Any `max_dynamic_smem` is granted to the kernel explicitly (static + dynamic above 48 KiB
  // needs it: Triton and TileLang kernels do).
  LoadResult load_image(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem);

  std::string driver_path_;
  // Set once under mutex_ by the first device query; read without the lock by unload and
  // launch on other threads (an archive may be destroyed while another is being resolved).
  std::atomic<const Driver*> driver_{nullptr};
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
};

}  // namespace kiln::cuda
