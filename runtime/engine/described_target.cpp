#include "engine/described_target.hpp"

#include <climits>

#include "core/code_object.hpp"
#include "core/error.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_features.hpp"
#include "hip/hip_backend.hpp"
#include "hip/hip_features.hpp"

namespace kiln::engine {

using kiln::Errc;
using kiln::Failure;

namespace {

// A described device's "loaded" code: never launches (nothing was loaded).
class UnlaunchableCode final : public backend::Code {
 public:
  int launch(const LaunchConfig&, void*, void**) const override { return -1; }
  int encode_tensor_map(const TensorMapRequest&, void*) const override { return -1; }
  int scratch(std::size_t, std::uint64_t, std::uint32_t, void*, std::uint64_t*) const override { return -1; }
};

backend::LoadOutcome simulated_load(ByteView image, const std::string& entry) {
  backend::LoadOutcome out;
  // The resolver has already checked the verified bytes' header against the index; the entry
  // symbol is not looked up (that takes the driver).
  (void)image;
  (void)entry;
  out.code = std::make_unique<UnlaunchableCode>();
  out.simulated = true;
  return out;
}

class DescribedCuda final : public backend::Backend {
 public:
  explicit DescribedCuda(const DescribedTarget& t) : spec_(t.spec), driver_given_(t.spec.driver_version > 0) {
    if (!driver_given_) spec_.driver_version = INT_MAX;  // "new enough for anything"
    info_.name = t.text;
    info_.arch = "sm_" + std::to_string(spec_.cc_major) + std::to_string(spec_.cc_minor);
    info_.cc_major = spec_.cc_major;
    info_.cc_minor = spec_.cc_minor;
    info_.driver_version = driver_given_ ? cuda::driver_version_text(spec_.driver_version) : "";
    info_.describe = "target " + t.text + " (cc " + std::to_string(spec_.cc_major) + "." + std::to_string(spec_.cc_minor) +
                     ", " + (driver_given_ ? "driver " + info_.driver_version : "driver not given: assumed new enough") + ")";
  }
  const char* vendor() const override { return cuda::kVendorName; }
  format::Vendor format_vendor() const override { return format::Vendor::cuda; }
  const char* launch_call() const override { return cuda::kLaunchCall; }
  const backend::DeviceInfo* device(int ordinal, kiln_reason*, std::string*) override {
    info_.ordinal = ordinal;
    return &info_;
  }
  std::string unmet_requirement(const backend::DeviceInfo&, const KernelTable& table) override {
    const std::string* min = table.toolchain_value("min_cuda_driver");
    int major = 0, minor = 0;
    if (min == nullptr || !cuda::parse_version_pair(*min, &major, &minor)) return "";
    if (spec_.driver_version >= major * 1000 + minor * 10) return "";
    return "the manifest needs a CUDA " + *min + " driver (min_cuda_driver)";
  }
  std::string unmet_feature(const backend::DeviceInfo& device, const KernelSpec& kernel) override {
    // A driver of the CUDA 12+ era has cuLaunchKernelEx, cuTensorMapEncodeTiled and the
    // allocator; what a described device can lack is compute capability.
    cuda::DriverFeatures features;
    features.launch_ex = features.tensor_map_encode = features.memory = true;
    return cuda::feature_problem(kernel, spec_, features, device.describe);
  }
  backend::TagFit judge(const backend::DeviceInfo&, const std::string& tag, format::CodeKind kind, ByteView content,
               const std::string& path) override {
    return cuda::judge_tag(spec_, tag, kind, content, path);
  }
  backend::LoadOutcome load(const backend::DeviceInfo&, ByteView image, format::CodeKind, const std::string& entry, unsigned) override {
    return simulated_load(image, entry);
  }
  std::string describe_error(int) const override { return "no driver: a described target"; }

 private:
  cuda::DeviceSpec spec_;
  bool driver_given_;
  backend::DeviceInfo info_;
};

class DescribedHip final : public backend::Backend {
 public:
  explicit DescribedHip(const DescribedTarget& t) : target_(t.amd) {
    info_.name = t.text;
    info_.arch = t.amd.text;
    info_.describe = "target " + t.text + " (an AMD device" +
                     (t.amd.sramecc == hip::Feature::any || t.amd.xnack == hip::Feature::any
                          ? "; a feature left out is unknown, so code built for either setting of it is judged not to fit"
                          : "") +
                     ")";
  }
  const char* vendor() const override { return hip::kVendorName; }
  format::Vendor format_vendor() const override { return format::Vendor::hip; }
  const char* launch_call() const override { return hip::kLaunchCall; }
  const backend::DeviceInfo* device(int ordinal, kiln_reason*, std::string*) override {
    info_.ordinal = ordinal;
    return &info_;
  }
  std::string unmet_requirement(const backend::DeviceInfo&, const KernelTable&) override { return ""; }
  std::string unmet_feature(const backend::DeviceInfo& device, const KernelSpec& kernel) override {
    return hip::feature_problem(device, kernel);
  }
  backend::TagFit judge(const backend::DeviceInfo&, const std::string& tag, format::CodeKind, ByteView, const std::string&) override {
    return hip::judge_tag(target_, tag);
  }
  backend::LoadOutcome load(const backend::DeviceInfo&, ByteView image, format::CodeKind, const std::string& entry, unsigned) override {
    return simulated_load(image, entry);
  }
  std::string describe_error(int) const override { return "no runtime: a described target"; }

 private:
  hip::TargetId target_;
  backend::DeviceInfo info_;
};

// The vendor the described target is not: no device of it.
class NoDevice final : public backend::Backend {
 public:
  NoDevice(format::Vendor which, std::string why) : which_(which), why_(std::move(why)) {}
  const char* vendor() const override { return which_ == format::Vendor::cuda ? cuda::kVendorName : hip::kVendorName; }
  format::Vendor format_vendor() const override { return which_; }
  const char* launch_call() const override {
    return which_ == format::Vendor::cuda ? cuda::kLaunchCall : hip::kLaunchCall;
  }
  const backend::DeviceInfo* device(int, kiln_reason* reason, std::string* why) override {
    *reason = KILN_REASON_NO_DEVICE;
    *why = why_;
    return nullptr;
  }
  std::string unmet_requirement(const backend::DeviceInfo&, const KernelTable&) override { return ""; }
  std::string unmet_feature(const backend::DeviceInfo&, const KernelSpec&) override { return ""; }
  backend::TagFit judge(const backend::DeviceInfo&, const std::string&, format::CodeKind, ByteView, const std::string&) override {
    return backend::TagFit();
  }
  backend::LoadOutcome load(const backend::DeviceInfo&, ByteView, format::CodeKind, const std::string&, unsigned) override {
    return backend::LoadOutcome();
  }
  std::string describe_error(int) const override { return ""; }

 private:
  format::Vendor which_;
  std::string why_;
};

}  // namespace

namespace {

// The compute capabilities NVIDIA has made GPUs of (CUDA's list of architectures, up to what nvcc
// 13.0's --list-gpu-code names): a described target must be a GPU that can exist, so that a typo
// (sm_999, sm_91) cannot pass a release gate as some future device.
constexpr int kCudaDeviceCcs[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121};

std::string known_cuda_devices() {
  std::string out;
  for (int cc : kCudaDeviceCcs) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(cc);
  return out;
}

}  // namespace

DescribedTarget parse_described_target(const std::string& text, const std::string& driver) {
  DescribedTarget t;
  t.text = text;
  cuda::Target code;
  if (cuda::parse_target(text, &code)) {
    if (code.is_ptx) {
      throw Failure(Errc::invalid_argument, "target '" + text + "' names PTX, not a GPU: give sm_" +
                                              std::to_string(code.major) + std::to_string(code.minor));
    }
    const int cc = code.major * 10 + code.minor;
    bool exists = false;
    for (int known : kCudaDeviceCcs) exists = exists || known == cc;
    if (!exists) {
      throw Failure(Errc::invalid_argument, "target '" + text + "' names compute capability " + std::to_string(code.major) +
                                              "." + std::to_string(code.minor) + ", which no NVIDIA GPU has (known: " +
                                              known_cuda_devices() + ")");
    }
    t.vendor = format::Vendor::cuda;
    t.spec.cc_major = code.major;
    t.spec.cc_minor = code.minor;
    if (!driver.empty()) {
      int major = 0, minor = 0;
      if (!cuda::parse_version_pair(driver, &major, &minor)) {
        throw Failure(Errc::invalid_argument, "driver '" + driver + "' is not a CUDA version such as 12.4");
      }
      t.spec.driver_version = major * 1000 + minor * 10;
    }
    return t;
  }
  if (hip::parse_target_id(text, &t.amd)) {
    t.vendor = format::Vendor::hip;
    if (!hip::generic_family(t.amd.processor).empty()) {
      throw Failure(Errc::invalid_argument, "target '" + text + "' is a generic code target, not a GPU: name the processor (gfx90a, gfx942, ...)");
    }
    if (!amdgpu_processor_known(t.amd.processor)) {
      throw Failure(Errc::invalid_argument, "target '" + text + "' names AMD processor " + t.amd.processor +
                                              ", which LLVM's AMDGPU target does not know (gfx90a, gfx942, gfx1100, ...)");
    }
    if (!driver.empty()) throw Failure(Errc::invalid_argument, "--driver is a CUDA driver version; target '" + text + "' is an AMD GPU");
    return t;
  }
  throw Failure(Errc::invalid_argument, "target '" + text +
                                          "' is neither a CUDA GPU (sm_80, sm_90, sm_100, ...) nor an AMD target ID (gfx90a:xnack-, gfx942, ...)");
}

std::unique_ptr<backend::Backend> described_cuda(const DescribedTarget& target) {
  return std::make_unique<DescribedCuda>(target);
}

std::unique_ptr<backend::Backend> described_hip(const DescribedTarget& target) {
  return std::make_unique<DescribedHip>(target);
}

std::unique_ptr<backend::Backend> described_without_device(format::Vendor vendor, const std::string& why) {
  return std::make_unique<NoDevice>(vendor, why);
}

}  // namespace kiln::engine
