#include "cuda_engine.hpp"

#include "code_object.hpp"
#include "cuda_features.hpp"
#include "error.hpp"

namespace kiln::cuda {

const engine::DeviceInfo* EngineBackend::device(int ordinal, kiln_reason* reason, std::string* why) {
  return devices_.find_or_make(ordinal, [&](engine::DeviceInfo* info) {
    Unavailable unavailable = Unavailable::none;
    const Device* d = cuda_.device(ordinal, &unavailable, why);
    if (d == nullptr) {
      *reason = unavailable == Unavailable::no_driver ? KILN_REASON_NO_DRIVER : KILN_REASON_NO_DEVICE;
      return false;
    }
    info->name = d->name;
    info->describe = d->describe();
    info->arch = "sm_" + std::to_string(d->spec.cc_major) + std::to_string(d->spec.cc_minor);
    info->driver_version = driver_version_text(d->spec.driver_version);
    info->cc_major = d->spec.cc_major;
    info->cc_minor = d->spec.cc_minor;
    return true;
  });
}

const Device& EngineBackend::native_device(const engine::DeviceInfo& device) {
  Unavailable unavailable = Unavailable::none;
  std::string why;
  const Device* d = cuda_.device(device.ordinal, &unavailable, &why);  // cached: found before
  if (d == nullptr) throw Error(Errc::internal, "CUDA device " + std::to_string(device.ordinal) + " vanished: " + why);
  return *d;
}

std::string EngineBackend::unmet_requirement(const engine::DeviceInfo& device, const KernelTable& table) {
  const std::string* min = table.toolchain_value("min_cuda_driver");
  int major = 0, minor = 0;
  if (min == nullptr || !parse_version_pair(*min, &major, &minor)) return "";  // the manifest parser checks its form
  if (native_device(device).spec.driver_version >= major * 1000 + minor * 10) return "";
  return "the manifest needs a CUDA " + *min + " driver (min_cuda_driver)";
}

std::string EngineBackend::unmet_feature(const engine::DeviceInfo& device, const KernelSpec& kernel) {
  const DriverApi& api = cuda_.driver()->api();  // a device was found: the driver is loaded
  DriverFeatures features;
  features.launch_ex = api.cuLaunchKernelEx != nullptr;
  features.tensor_map_encode = api.cuTensorMapEncodeTiled != nullptr;
  features.memory = api.cuMemAlloc != nullptr && api.cuMemFree != nullptr;
  return feature_problem(kernel, native_device(device).spec, features, device.describe);
}

engine::TagFit judge_tag(const DeviceSpec& spec, const std::string& tag, format::CodeKind kind, ByteView content,
                         const std::string& what) {
  engine::TagFit fit;
  Target target;
  if (!parse_target(tag, &target)) return fit;
  fit.recognised = true;
  fit.jit = target.is_ptx;
  // A PTX member's ISA version can be read only from its verified bytes: asked for later, and
  // only when no native code object fits (a PTX member can be hundreds of KiB).
  if (kind == format::CodeKind::ptx && target.is_ptx && content.size == 0) {
    fit.needs_content = true;
    return fit;
  }
  std::string isa;
  if (content.size > 0) isa = inspect_ptx(content, what).ptx_isa;
  Judgement j = cuda::judge(target, spec, isa);
  fit.fits = j.verdict == Verdict::fits;
  fit.driver_too_old = j.verdict == Verdict::driver_too_old;
  fit.rank = j.rank;
  fit.why = j.why;
  return fit;
}

engine::TagFit EngineBackend::judge(const engine::DeviceInfo& device, const std::string& tag, format::CodeKind kind,
                                    ByteView content, const std::string& what) {
  return judge_tag(native_device(device).spec, tag, kind, content, what);
}

engine::LoadOutcome EngineBackend::load(const engine::DeviceInfo& device, ByteView image, format::CodeKind kind,
                                        const std::string& entry, unsigned max_dynamic_smem) {
  const Device& d = native_device(device);
  std::vector<std::uint8_t> ptx;
  if (kind == format::CodeKind::ptx) {  // the driver reads PTX as a C string
    ptx.assign(image.data, image.data + image.size);
    ptx.push_back('\0');
    image = ByteView(ptx);
  }
  LoadResult r = cuda_.load(d, image, entry, max_dynamic_smem);
  engine::LoadOutcome out;
  out.nanoseconds = r.nanoseconds;
  if (!r.ok) {
    out.error = r.cuda_error;
    out.message = r.error;
    return out;
  }
  out.code = std::make_unique<engine::CodeOn<cuda::Backend, Device, LoadedCode>>(cuda_, d, r.code);
  return out;
}

std::string EngineBackend::describe_error(int error) const {
  const Driver* d = cuda_.driver();
  return d ? d->describe(error) : "CUDA error " + std::to_string(error);
}

}  // namespace kiln::cuda
