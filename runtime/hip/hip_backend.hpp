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
#include "cuda_backend.hpp"  // LaunchConfig, Unavailable: the two backends share their shapes

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
  LoadResult load(const Device& device, ByteView image, const std::string& entry);
  void unload(LoadedCode& code);
  int launch(const LoadedCode& code, const cuda::LaunchConfig& config, void* stream, void** args) const;
  std::string describe(int error) const;

 private:
  std::string library_path_;
  std::atomic<const HipApi*> api_{nullptr};
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
};

}  // namespace kiln::hip
