#include "hip/hip_backend.hpp"
#include "hip/hip_driver.hpp"
#include "hip/hip_features.hpp"

#include <chrono>
#include <cstring>
#include <vector>

#if KILN_HAVE_HIP_HEADERS
// Only for the layout of hipDeviceProp_t (the offset of gcnArchName), which varies between
// ROCm releases: it is taken from the headers this build saw, and used only when the runtime
// library reports the same major version.
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#endif

namespace kiln::hip {
namespace {

constexpr int kHipFuncAttributeMaxDynamicSharedMemorySize = 8;  // hipFuncAttribute in hip_runtime_api.h
constexpr unsigned kDefaultSharedLimit = 64 * 1024;              // an AMD workgroup's LDS without asking

}  // namespace

std::string Device::describe() const {
  return "AMD device " + std::to_string(ordinal) + " '" + name + "' (" + target.text + ")";
}

std::string HipBackend::describe_error(int error) const {
  const HipApi* api = api_.load(std::memory_order_acquire);
  return api ? std::string(api->hipGetErrorName(error)) : "HIP error " + std::to_string(error);
}

const Device* HipBackend::native_device(int ordinal, backend::Unavailable* kind, std::string* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = devices_.find(ordinal);
  if (it != devices_.end()) return it->second.get();
  bool no_device = false;
  const HipApi* api = api_.load(std::memory_order_acquire);
  if (api == nullptr) {
    api = load_api(library_path_.empty() ? "libamdhip64.so.5" : library_path_, why, &no_device);
    if (api == nullptr && library_path_.empty() && !no_device) api = load_api("libamdhip64.so", why, &no_device);
    api_.store(api, std::memory_order_release);
  }
  if (api == nullptr) {
    *kind = no_device ? backend::Unavailable::no_device : backend::Unavailable::no_driver;
    return nullptr;
  }
#if KILN_HAVE_HIP_HEADERS
  if (api->runtime_version / 10000000 != HIP_VERSION_MAJOR) {
    *kind = backend::Unavailable::no_driver;
    *why = "the HIP runtime is version " + std::to_string(api->runtime_version) + " but this libkiln was built with HIP " +
           std::to_string(HIP_VERSION_MAJOR) + " headers; the device properties layout differs";
    return nullptr;
  }
  std::vector<unsigned char> props(sizeof(hipDeviceProp_t) + 4096, 0);
  int r = api->hipGetDeviceProperties(props.data(), ordinal);
  if (r != 0) {
    *kind = backend::Unavailable::no_device;
    *why = "no AMD device " + std::to_string(ordinal) + ": " + describe_error(r);
    return nullptr;
  }
  auto d = std::make_unique<Device>();
  d->ordinal = ordinal;
  const char* name = reinterpret_cast<const char*>(props.data() + offsetof(hipDeviceProp_t, name));
  const char* arch = reinterpret_cast<const char*>(props.data() + offsetof(hipDeviceProp_t, gcnArchName));
  d->name.assign(name, strnlen(name, 256));
  std::string id(arch, strnlen(arch, 256));
  if (!parse_target_id(id, &d->target)) {
    *kind = backend::Unavailable::no_device;
    *why = "AMD device " + std::to_string(ordinal) + " reports target ID '" + id + "', which kiln cannot read";
    return nullptr;
  }
  d->info.ordinal = ordinal;
  d->info.native = d.get();
  d->info.name = d->name;
  d->info.describe = d->describe();
  d->info.arch = d->target.text;
  // HIP_VERSION's encoding: major * 10^7 + minor * 10^5 + patch
  d->info.driver_version = "HIP " + std::to_string(api->runtime_version / 10000000) + "." +
                           std::to_string(api->runtime_version / 100000 % 100);
  return devices_.emplace(ordinal, std::move(d)).first->second.get();
#else
  *kind = backend::Unavailable::no_driver;
  *why = "this libkiln was built without HIP headers, so it cannot read an AMD device's target ID";
  return nullptr;
#endif
}

LoadResult HipBackend::load_image(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem) {
  const HipApi* api = api_.load(std::memory_order_acquire);
  LoadResult result;
  auto start = std::chrono::steady_clock::now();
  int r = 0;
  {
    DeviceScope scope(*api, device.ordinal);
    r = scope.status();
    if (r == 0) r = api->hipModuleLoadData(&result.code.module, image.data);
    if (r == 0) r = api->hipModuleGetFunction(&result.code.function, result.code.module, entry.c_str());
    if (r == 0 && max_dynamic_smem > kDefaultSharedLimit) {
      if (api->hipFuncSetAttribute == nullptr) {
        result.error = "the kernel's shapes ask for " + std::to_string(max_dynamic_smem) +
                       " bytes of dynamic shared memory and this HIP runtime has no hipFuncSetAttribute to grant them";
        result.hip_error = -1;
      } else {
        r = api->hipFuncSetAttribute(result.code.function, kHipFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(max_dynamic_smem));
      }
    }
  }
  result.nanoseconds = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  if (r != 0 || result.hip_error != 0) {
    if (r != 0) {
      result.hip_error = r;
      result.error = describe_error(r);
    }
    unload(result.code);
    return result;
  }
  result.ok = true;
  return result;
}

void HipBackend::unload(LoadedCode& code) {
  const HipApi* api = api_.load(std::memory_order_acquire);
  if (api != nullptr && code.module != nullptr) api->hipModuleUnload(code.module);
  code = LoadedCode{};
}

int HipBackend::launch(const Device& device, const LoadedCode& code, const LaunchConfig& c, void* stream,
                    void** args) const {
  const HipApi* api = api_.load(std::memory_order_acquire);
  DeviceScope scope(*api, device.ordinal);  // a module runs on the device it was loaded on
  if (scope.status() != 0) return scope.status();
  return api->hipModuleLaunchKernel(code.function, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2],
                                    c.shared_mem, stream, args, nullptr);
}

int HipBackend::runtime_version() const {
  const HipApi* api = api_.load(std::memory_order_acquire);
  return api ? api->runtime_version : 0;
}

const backend::DeviceInfo* HipBackend::device(int ordinal, kiln_reason* reason, std::string* why) {
  backend::Unavailable unavailable = backend::Unavailable::none;
  const Device* d = native_device(ordinal, &unavailable, why);
  if (d == nullptr) {
    *reason = unavailable == backend::Unavailable::no_driver ? KILN_REASON_NO_DRIVER : KILN_REASON_NO_DEVICE;
    return nullptr;
  }
  return &d->info;
}

const Device& HipBackend::device_of(const backend::DeviceInfo& device) {
  // Every description this backend hands out carries its record (native_device), and records
  // live as long as the backend.
  if (device.native == nullptr) {
    throw Failure(Errc::internal, "AMD device " + std::to_string(device.ordinal) + ": a description this backend did not make");
  }
  return *static_cast<const Device*>(device.native);
}

std::string HipBackend::unmet_feature(const backend::DeviceInfo& device, const KernelSpec& kernel) {
  return feature_problem(device, kernel);
}

backend::TagFit judge_tag(const TargetId& device, const std::string& tag) {
  backend::TagFit fit;
  TargetId id;
  if (!parse_target_id(tag, &id)) return fit;
  fit.recognised = true;
  Judgement j = hip::judge(id, device);
  fit.fits = j.fits;
  fit.rank = j.rank;
  fit.why = j.why;
  return fit;
}

backend::TagFit HipBackend::judge(const backend::DeviceInfo& device, const std::string& tag, format::CodeKind,
                                    ByteView, const std::string&) {
  return judge_tag(device_of(device).target, tag);
}

backend::LoadOutcome HipBackend::load(const backend::DeviceInfo& device, ByteView image, format::CodeKind,
                                        const std::string& entry, unsigned max_dynamic_smem) {
  const Device& d = device_of(device);
  LoadResult r = load_image(d, image, entry, max_dynamic_smem);
  backend::LoadOutcome out;
  out.nanoseconds = r.nanoseconds;
  if (!r.ok) {
    out.error = r.hip_error;
    out.message = r.error;
    return out;
  }
  out.code = std::make_unique<backend::CodeOn<HipBackend, Device, LoadedCode>>(*this, d, r.code);
  return out;
}

}  // namespace kiln::hip
