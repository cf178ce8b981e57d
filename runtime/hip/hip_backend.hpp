// The HIP side of the runtime, the twin of cuda_backend: which AMD devices exist and their
// target IDs, loading a verified code object (or clang offload bundle) for one, launching.
// libamdhip64 is loaded with dlopen, so libkiln builds and runs where ROCm is absent.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "amd_target.hpp"
#include "bytes.hpp"
#include "cuda_backend.hpp"  // Unavailable
#include "launch_config.hpp"

namespace kiln::hip {

struct HipApi;

struct Device {
  int ordinal = 0;
  std::string name;
  TargetId target;  // from hipGetDeviceProperties' gcnArchName
  std::string describe() const;
};

struct LoadedCode {
  void* module = nullptr;    // hipModule_t
  void* function = nullptr;  // hipFunction_t
  bool loaded() const { return function != nullptr; }
};

struct LoadResult {
  bool ok = false;
  LoadedCode code;
  std::string error;
  int hip_error = 0;
  std::uint64_t nanoseconds = 0;
};

class Backend {
 public:
  explicit Backend(std::string library_path) : library_path_(std::move(library_path)) {}
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const Device* device(int ordinal, cuda::Unavailable* kind, std::string* why);
  // Loads on `device` and grants `max_dynamic_smem` above the default limit; the calling
  // thread's current device is put back afterwards.
  LoadResult load(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem);
  void unload(LoadedCode& code);
  // Launches on `device` (made current for the call, then the thread's own put back).
  int launch(const Device& device, const LoadedCode& code, const LaunchConfig& config, void* stream, void** args) const;
  // HIP has no tensor maps, and kiln provides no scratch on it: resolution refuses a kernel
  // that needs either (hip_engine.cpp), so these only answer hipErrorNotSupported.
  static constexpr int kNotSupported = 801;
  int encode_tensor_map(const Device&, const TensorMapRequest&, void*) const { return kNotSupported; }
  int scratch(const Device&, std::size_t, std::uint64_t, std::uint32_t, void*, std::uint64_t*) const { return kNotSupported; }
  std::string describe(int error) const;
  int runtime_version() const;  // hipRuntimeGetVersion's, 0 before the runtime is loaded

 private:
  std::string library_path_;
  std::atomic<const HipApi*> api_{nullptr};
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
};

}  // namespace kiln::hip
