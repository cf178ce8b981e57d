#include "hip_engine.hpp"

#include "error.hpp"
#include "launch_features.hpp"

namespace kiln::hip {

const engine::DeviceInfo* EngineBackend::device(int ordinal, kiln_reason* reason, std::string* why) {
  return devices_.find_or_make(ordinal, [&](engine::DeviceInfo* info) {
    cuda::Unavailable unavailable = cuda::Unavailable::none;
    const Device* d = hip_.device(ordinal, &unavailable, why);
    if (d == nullptr) {
      *reason = unavailable == cuda::Unavailable::no_driver ? KILN_REASON_NO_DRIVER : KILN_REASON_NO_DEVICE;
      return false;
    }
    info->name = d->name;
    info->describe = d->describe();
    info->arch = d->target.text;
    int v = hip_.runtime_version();  // HIP_VERSION's encoding: major * 10^7 + minor * 10^5 + patch
    info->driver_version = "HIP " + std::to_string(v / 10000000) + "." + std::to_string(v / 100000 % 100);
    return true;
  });
}

const Device& EngineBackend::native_device(const engine::DeviceInfo& device) {
  cuda::Unavailable unavailable = cuda::Unavailable::none;
  std::string why;
  const Device* d = hip_.device(device.ordinal, &unavailable, &why);  // cached: found before
  if (d == nullptr) throw Error(Errc::internal, "AMD device " + std::to_string(device.ordinal) + " vanished: " + why);
  return *d;
}

std::string amd_feature_problem(const engine::DeviceInfo& device, const KernelSpec& kernel) {
  LaunchFeatures f = launch_features(kernel);
  if (!f.any()) return "";
  return "kernel '" + kernel.name + "' needs " + describe_first_feature(f) + ", which kiln launches only through CUDA; " +
         device.describe + " is an AMD device";
}

std::string EngineBackend::unmet_feature(const engine::DeviceInfo& device, const KernelSpec& kernel) {
  return amd_feature_problem(device, kernel);
}

engine::TagFit judge_tag(const TargetId& device, const std::string& tag) {
  engine::TagFit fit;
  TargetId id;
  if (!parse_target_id(tag, &id)) return fit;
  fit.recognised = true;
  Judgement j = hip::judge(id, device);
  fit.fits = j.fits;
  fit.rank = j.rank;
  fit.why = j.why;
  return fit;
}

engine::TagFit EngineBackend::judge(const engine::DeviceInfo& device, const std::string& tag, format::CodeKind,
                                    ByteView, const std::string&) {
  return judge_tag(native_device(device).target, tag);
}

engine::LoadOutcome EngineBackend::load(const engine::DeviceInfo& device, ByteView image, format::CodeKind,
                                        const std::string& entry, unsigned max_dynamic_smem) {
  const Device& d = native_device(device);
  LoadResult r = hip_.load(d, image, entry, max_dynamic_smem);
  engine::LoadOutcome out;
  out.nanoseconds = r.nanoseconds;
  if (!r.ok) {
    out.error = r.hip_error;
    out.message = r.error;
    return out;
  }
  out.code = std::make_unique<engine::CodeOn<hip::Backend, Device, LoadedCode>>(hip_, d, r.code);
  return out;
}

}  // namespace kiln::hip
