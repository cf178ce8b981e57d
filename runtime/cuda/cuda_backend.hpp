// The CUDA side of the runtime: which devices exist and what they are, loading a verified
// code object for one of them, and launching. The HIP backend (runtime/hip) is its twin.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bytes.hpp"
#include "cuda_driver.hpp"
#include "cuda_target.hpp"
#include "launch_config.hpp"

namespace kiln::cuda {

enum class Unavailable { none, no_driver, no_device };

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
  int ordinal = 0;
  CUdevice handle = 0;
  CUcontext primary = nullptr;  // retained for the backend's lifetime
  DeviceSpec spec;
  std::string name;             // "NVIDIA H200"
  std::string describe() const; // "device 0 'NVIDIA H200' (cc 9.0, driver 13.0)"
  mutable ScratchPool scratch;
};

struct LoadedCode {
  CUlibrary library = nullptr;  // cuLibraryLoadData path (context-independent)
  CUkernel kernel = nullptr;
  CUmodule module = nullptr;    // cuModuleLoadDataEx path (older drivers)
  CUfunction function = nullptr;
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

class Backend {
 public:
  explicit Backend(std::string driver_path) : driver_path_(std::move(driver_path)) {}
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // The device, or null with why it is unavailable. Queried once per ordinal; thread-safe.
  const Device* device(int ordinal, Unavailable* kind, std::string* why);
  const Driver* driver() const { return driver_.load(std::memory_order_acquire); }

  // Loads a verified image (a cubin, fatbin, or NUL-terminated PTX) and finds `entry` in it.
  // Any `max_dynamic_smem` is granted to the kernel explicitly (static + dynamic above 48 KiB
  // needs it: Triton and TileLang kernels do).
  LoadResult load(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem);
  void unload(LoadedCode& code);

  // Launches on `stream` in the device's primary context (made current for the call if the
  // calling thread has another one current).
  CUresult launch(const Device& device, const LoadedCode& code, const LaunchConfig& config, void* stream,
                  void** args) const;
  // cuTensorMapEncodeTiled over a recipe and a call's values (a host-side call: no context).
  CUresult encode_tensor_map(const Device& device, const TensorMapRequest& request, void* out) const;
  // Scratch memory for `slot` of launches on `stream`: at least `bytes`, aligned to `align`.
  CUresult scratch(const Device& device, std::size_t slot, std::uint64_t bytes, std::uint32_t align, void* stream,
                   std::uint64_t* address) const;

 private:
  std::string driver_path_;
  // Set once under mutex_ by the first device query; read without the lock by unload and
  // launch on other threads (an archive may be destroyed while another is being resolved).
  std::atomic<const Driver*> driver_{nullptr};
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
};

}  // namespace kiln::cuda
