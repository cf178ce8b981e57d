#include "hip_backend.hpp"

#include <dlfcn.h>

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

struct HipApi {
  int (*hipInit)(unsigned) = nullptr;
  int (*hipRuntimeGetVersion)(int*) = nullptr;
  int (*hipGetDeviceCount)(int*) = nullptr;
  int (*hipGetDeviceProperties)(void*, int) = nullptr;
  int (*hipSetDevice)(int) = nullptr;
  int (*hipGetDevice)(int*) = nullptr;
  int (*hipFuncSetAttribute)(const void*, int, int) = nullptr;  // optional: dynamic shared memory above the default
  int (*hipModuleLoadData)(void**, const void*) = nullptr;
  int (*hipModuleUnload)(void*) = nullptr;
  int (*hipModuleGetFunction)(void**, void*, const char*) = nullptr;
  int (*hipModuleLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                               void**) = nullptr;
  const char* (*hipGetErrorName)(int) = nullptr;
  int runtime_version = 0;
};

namespace {

const HipApi* load_api(const std::string& path, std::string* why, bool* no_device) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<std::unique_ptr<HipApi>, std::pair<std::string, bool>>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) {
    auto api = std::make_unique<HipApi>();
    std::string error;
    bool nodev = false;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = ::dlerror();
      error = "the HIP runtime (" + path + ") could not be loaded: " + (e ? e : "unknown error");
    } else {
      bool ok = true;
      auto bind = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
        if (fn == nullptr && ok) error = "the HIP runtime (" + path + ") lacks " + name, ok = false;
      };
      bind(api->hipInit, "hipInit");
      bind(api->hipRuntimeGetVersion, "hipRuntimeGetVersion");
      bind(api->hipGetDeviceCount, "hipGetDeviceCount");
      bind(api->hipGetDeviceProperties, "hipGetDeviceProperties");
      bind(api->hipSetDevice, "hipSetDevice");
      bind(api->hipGetDevice, "hipGetDevice");
      bind(api->hipModuleLoadData, "hipModuleLoadData");
      bind(api->hipModuleUnload, "hipModuleUnload");
      bind(api->hipModuleGetFunction, "hipModuleGetFunction");
      bind(api->hipModuleLaunchKernel, "hipModuleLaunchKernel");
      bind(api->hipGetErrorName, "hipGetErrorName");
      api->hipFuncSetAttribute = reinterpret_cast<decltype(api->hipFuncSetAttribute)>(::dlsym(lib, "hipFuncSetAttribute"));
      if (ok) {
        int count = 0;
        int r = api->hipInit(0);
        int c = api->hipGetDeviceCount(&count);
        if (r != 0 || c != 0 || count == 0) {
          nodev = true;
          error = std::string("the HIP runtime reports no AMD device (") + api->hipGetErrorName(c != 0 ? c : r) + ")";
        } else {
          api->hipRuntimeGetVersion(&api->runtime_version);
        }
      }
    }
    it = loaded.emplace(path, std::make_pair(error.empty() ? std::move(api) : nullptr, std::make_pair(error, nodev))).first;
  }
  if (!it->second.first) {
    *why = it->second.second.first;
    *no_device = it->second.second.second;
    return nullptr;
  }
  return it->second.first.get();
}

// Makes `ordinal` the calling thread's current HIP device for a scope, and puts the thread's
// own device back after: libkiln must not leave a serving thread on another GPU (the CUDA
// side does the same with the primary context).
class DeviceScope {
 public:
  DeviceScope(const HipApi& api, int ordinal) : api_(api) {
    if (api_.hipGetDevice(&previous_) != 0) previous_ = -1;
    if (previous_ != ordinal) status_ = api_.hipSetDevice(ordinal);
    else previous_ = -1;  // already current: nothing to restore
  }
  ~DeviceScope() {
    if (previous_ >= 0) api_.hipSetDevice(previous_);
  }
  int status() const { return status_; }

 private:
  const HipApi& api_;
  int previous_ = -1;
  int status_ = 0;
};

constexpr int kHipFuncAttributeMaxDynamicSharedMemorySize = 8;  // hipFuncAttribute in hip_runtime_api.h
constexpr unsigned kDefaultSharedLimit = 64 * 1024;              // an AMD workgroup's LDS without asking

}  // namespace

std::string Device::describe() const {
  return "AMD device " + std::to_string(ordinal) + " '" + name + "' (" + target.text + ")";
}

std::string Backend::describe(int error) const {
  const HipApi* api = api_.load(std::memory_order_acquire);
  return api ? std::string(api->hipGetErrorName(error)) : "HIP error " + std::to_string(error);
}

const Device* Backend::device(int ordinal, cuda::Unavailable* kind, std::string* why) {
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
    *kind = no_device ? cuda::Unavailable::no_device : cuda::Unavailable::no_driver;
    return nullptr;
  }
#if KILN_HAVE_HIP_HEADERS
  if (api->runtime_version / 10000000 != HIP_VERSION_MAJOR) {
    *kind = cuda::Unavailable::no_driver;
    *why = "the HIP runtime is version " + std::to_string(api->runtime_version) + " but this libkiln was built with HIP " +
           std::to_string(HIP_VERSION_MAJOR) + " headers; the device properties layout differs";
    return nullptr;
  }
  std::vector<unsigned char> props(sizeof(hipDeviceProp_t) + 4096, 0);
  int r = api->hipGetDeviceProperties(props.data(), ordinal);
  if (r != 0) {
    *kind = cuda::Unavailable::no_device;
    *why = "no AMD device " + std::to_string(ordinal) + ": " + describe(r);
    return nullptr;
  }
  auto d = std::make_unique<Device>();
  d->ordinal = ordinal;
  const char* name = reinterpret_cast<const char*>(props.data() + offsetof(hipDeviceProp_t, name));
  const char* arch = reinterpret_cast<const char*>(props.data() + offsetof(hipDeviceProp_t, gcnArchName));
  d->name.assign(name, strnlen(name, 256));
  std::string id(arch, strnlen(arch, 256));
  if (!parse_target_id(id, &d->target)) {
    *kind = cuda::Unavailable::no_device;
    *why = "AMD device " + std::to_string(ordinal) + " reports target ID '" + id + "', which kiln cannot read";
    return nullptr;
  }
  return devices_.emplace(ordinal, std::move(d)).first->second.get();
#else
  *kind = cuda::Unavailable::no_driver;
  *why = "this libkiln was built without HIP headers, so it cannot read an AMD device's target ID";
  return nullptr;
#endif
}

LoadResult Backend::load(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem) {
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
      result.error = describe(r);
    }
    unload(result.code);
    return result;
  }
  result.ok = true;
  return result;
}

void Backend::unload(LoadedCode& code) {
  const HipApi* api = api_.load(std::memory_order_acquire);
  if (api != nullptr && code.module != nullptr) api->hipModuleUnload(code.module);
  code = LoadedCode{};
}

int Backend::launch(const Device& device, const LoadedCode& code, const LaunchConfig& c, void* stream,
                    void** args) const {
  const HipApi* api = api_.load(std::memory_order_acquire);
  DeviceScope scope(*api, device.ordinal);  // a module runs on the device it was loaded on
  if (scope.status() != 0) return scope.status();
  return api->hipModuleLaunchKernel(code.function, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2],
                                    c.shared_mem, stream, args, nullptr);
}

int Backend::runtime_version() const {
  const HipApi* api = api_.load(std::memory_order_acquire);
  return api ? api->runtime_version : 0;
}

}  // namespace kiln::hip
