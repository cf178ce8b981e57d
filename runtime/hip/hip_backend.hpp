// The HIP backend (backend/backend.hpp), the twin of cuda_backend: which AMD devices exist and
// their target IDs, kiln's target-ID matching (hip_target), loading a verified code object (or
// clang offload bundle) for one, launching.
// libamdhip64 is loaded with dlopen, so libkiln builds and runs where ROCm is absent.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.hpp"
#include "core/bytes.hpp"
#include "core/kernel_table.hpp"
#include "core/launch_config.hpp"
#include "hip/hip_target.hpp"

namespace kiln::hip {

struct HipApi;

struct Device {
  backend::DeviceInfo info;  // what the engine, reasons and logs see of it
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

// kiln's verdict on one target tag for an AMD device whose own target ID is `device` (the body
// of every HIP backend's judge: the runtime's and a described target's).
backend::TagFit judge_tag(const TargetId& device, const std::string& tag);

// How reasons and launch errors name this vendor (its backend and its described targets' alike).
inline constexpr const char* kVendorName = "HIP";
inline constexpr const char* kLaunchCall = "hipModuleLaunchKernel";

class HipBackend final : public backend::Backend {
 public:
  explicit HipBackend(std::string library_path) : library_path_(std::move(library_path)) {}
  HipBackend(const HipBackend&) = delete;
  HipBackend& operator=(const HipBackend&) = delete;

  // backend::Backend
  const char* vendor() const override { return kVendorName; }
  format::Vendor format_vendor() const override { return format::Vendor::hip; }
  const char* launch_call() const override { return kLaunchCall; }
  const backend::DeviceInfo* device(int ordinal, kiln_reason* reason, std::string* why) override;
  std::string unmet_requirement(const backend::DeviceInfo&, const KernelTable&) override { return ""; }
  std::string unmet_feature(const backend::DeviceInfo& device, const KernelSpec& kernel) override;
  backend::TagFit judge(const backend::DeviceInfo& device, const std::string& tag, format::CodeKind kind,
                        ByteView content, const std::string& path) override;
  backend::LoadOutcome load(const backend::DeviceInfo& device, ByteView image, format::CodeKind kind,
                            const std::string& entry, unsigned max_dynamic_smem) override;
  std::string describe_error(int error) const override;
  // Memory, copies and event timing on the device (hip_tools.cpp).
  std::unique_ptr<backend::DeviceTools> tools(const backend::DeviceInfo& device, std::string* why) override;

  // A device of the HIP runtime, queried once per ordinal, then cached; thread-safe.
  const Device* native_device(int ordinal, backend::Unavailable* kind, std::string* why);
  int runtime_version() const;  // hipRuntimeGetVersion's, 0 before the runtime is loaded

  // What loaded code does (backend::CodeOn). Launches on `device` (made current for the call,
  // then the thread's own put back). HIP has no tensor maps, and kiln provides no scratch on it:
  // resolution refuses a kernel that needs either (hip_features.cpp), so these only answer
  // hipErrorNotSupported.
  int launch(const Device& device, const LoadedCode& code, const LaunchConfig& config, void* stream, void** args) const;
  static constexpr int kNotSupported = 801;
  int encode_tensor_map(const Device&, const TensorMapRequest&, void*) const { return kNotSupported; }
  int scratch(const Device&, std::size_t, std::uint64_t, std::uint32_t, void*, std::uint64_t*) const { return kNotSupported; }
  void unload(LoadedCode& code);

 private:
  // The device a DeviceInfo this backend made describes (its `native` record).
  const Device& device_of(const backend::DeviceInfo& info);
  // Loads on `device` and grants `max_dynamic_smem` above the default limit; the calling
  // thread's current device is put back afterwards.
  LoadResult load_image(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem);

  std::string library_path_;
  std::atomic<const HipApi*> api_{nullptr};
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
};

}  // namespace kiln::hip
