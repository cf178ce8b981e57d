// The CUDA implementation of engine::Backend: the driver's devices, kiln's CUDA matching rules
// (cuda_target), and loads and launches through cuda_backend.
#pragma once

#include <string>

#include "backend.hpp"
#include "cuda_backend.hpp"

namespace kiln::cuda {

// kiln's verdict on one target tag for a device of `spec` (the body of every CUDA backend's
// judge: the driver's and a described target's, kiln preflight --target).
engine::TagFit judge_tag(const DeviceSpec& spec, const std::string& tag, format::CodeKind kind, ByteView content,
                         const std::string& what);

class EngineBackend final : public engine::Backend {
 public:
  explicit EngineBackend(std::string driver_path) : cuda_(std::move(driver_path)) {}

  const char* vendor() const override { return "CUDA"; }
  format::Backend format_backend() const override { return format::Backend::cuda; }
  const char* launch_call() const override { return "cuLaunchKernel"; }
  const engine::DeviceInfo* device(int ordinal, kiln_reason* reason, std::string* why) override;
  std::string unmet_requirement(const engine::DeviceInfo& device, const KernelTable& table) override;
  std::string unmet_feature(const engine::DeviceInfo& device, const KernelSpec& kernel) override;
  engine::TagFit judge(const engine::DeviceInfo& device, const std::string& tag, format::CodeKind kind,
                       ByteView content, const std::string& what) override;
  engine::LoadOutcome load(const engine::DeviceInfo& device, ByteView image, format::CodeKind kind,
                           const std::string& entry, unsigned max_dynamic_smem) override;
  std::string describe_error(int error) const override;

  // The driver-level backend, for kiln's own tools (verify --run allocates and times on the
  // device's primary context).
  cuda::Backend& native() { return cuda_; }

 private:
  const Device& native_device(const engine::DeviceInfo& device);

  cuda::Backend cuda_;  // (a bare "Backend" here would name engine::Backend, the base)
  engine::DeviceTable devices_;
};

}  // namespace kiln::cuda
