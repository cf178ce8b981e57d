// The HIP implementation of engine::Backend: AMD devices and their target IDs, kiln's target-ID
// matching (amd_target), and loads and launches through hip_backend.
#pragma once

#include <string>

#include "backend.hpp"
#include "hip_backend.hpp"

namespace kiln::hip {

// kiln's verdict on one target tag for an AMD device whose own target ID is `device` (the body
// of every HIP backend's judge), and why `kernel` cannot launch on an AMD device (or "").
engine::TagFit judge_tag(const TargetId& device, const std::string& tag);
std::string amd_feature_problem(const engine::DeviceInfo& device, const KernelSpec& kernel);

class EngineBackend final : public engine::Backend {
 public:
  explicit EngineBackend(std::string library_path) : hip_(std::move(library_path)) {}

  const char* vendor() const override { return "HIP"; }
  format::Backend format_backend() const override { return format::Backend::hip; }
  const char* launch_call() const override { return "hipModuleLaunchKernel"; }
  const engine::DeviceInfo* device(int ordinal, kiln_reason* reason, std::string* why) override;
  std::string unmet_requirement(const engine::DeviceInfo&, const KernelTable&) override { return ""; }
  std::string unmet_feature(const engine::DeviceInfo& device, const KernelSpec& kernel) override;
  engine::TagFit judge(const engine::DeviceInfo& device, const std::string& tag, format::CodeKind kind,
                       ByteView content, const std::string& what) override;
  engine::LoadOutcome load(const engine::DeviceInfo& device, ByteView image, format::CodeKind kind,
                           const std::string& entry, unsigned max_dynamic_smem) override;
  std::string describe_error(int error) const override { return hip_.describe(error); }

 private:
  const Device& native_device(const engine::DeviceInfo& device);

  hip::Backend hip_;  // (a bare "Backend" here would name engine::Backend, the base)
  engine::DeviceTable devices_;
};

}  // namespace kiln::hip
