#include "cuda/cuda_driver.hpp"

#include <dlfcn.h>

#include <map>
#include <memory>

namespace kiln::cuda {
namespace {

struct Loaded {
  std::unique_ptr<Driver> driver;
  std::string why;
  bool no_device = false;
};

template <typename Fn>
bool bind(void* lib, const char* symbol, Fn& fn, bool required, std::string* missing) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, symbol));
  if (fn == nullptr && required && missing->empty()) *missing = symbol;
  return fn != nullptr;
}

}  // namespace

const Driver* Driver::get(const std::string& path_option, std::string* why, bool* no_device) {
  // One load per library path (tests point at missing paths to exercise the no-driver route).
  static std::mutex mutex;
  static std::map<std::string, Loaded> loaded;
  const std::string path = path_option.empty() ? "libcuda.so.1" : path_option;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) {
    Loaded result;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = ::dlerror();
      result.why = "the CUDA driver (" + path + ") could not be loaded: " + (err ? err : "unknown error");
    } else {
      auto d = std::make_unique<Driver>();
      DriverApi& a = d->api_;
      std::string missing;
      bind(lib, "cuInit", a.cuInit, true, &missing);
      bind(lib, "cuDriverGetVersion", a.cuDriverGetVersion, true, &missing);
      bind(lib, "cuGetErrorName", a.cuGetErrorName, true, &missing);
      bind(lib, "cuGetErrorString", a.cuGetErrorString, true, &missing);
      bind(lib, "cuDeviceGetCount", a.cuDeviceGetCount, true, &missing);
      bind(lib, "cuDeviceGet", a.cuDeviceGet, true, &missing);
      bind(lib, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, true, &missing);
      bind(lib, "cuDeviceGetName", a.cuDeviceGetName, true, &missing);
      bind(lib, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, true, &missing);
      bind(lib, "cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease, true, &missing);
      bind(lib, "cuCtxGetCurrent", a.cuCtxGetCurrent, true, &missing);
      bind(lib, "cuCtxSetCurrent", a.cuCtxSetCurrent, true, &missing);
      bind(lib, "cuCtxPushCurrent_v2", a.cuCtxPushCurrent, true, &missing);
      bind(lib, "cuCtxPopCurrent_v2", a.cuCtxPopCurrent, true, &missing);
      bind(lib, "cuModuleLoadDataEx", a.cuModuleLoadDataEx, true, &missing);
      bind(lib, "cuModuleUnload", a.cuModuleUnload, true, &missing);
      bind(lib, "cuModuleGetFunction", a.cuModuleGetFunction, true, &missing);
      bind(lib, "cuFuncSetAttribute", a.cuFuncSetAttribute, true, &missing);
      bind(lib, "cuLaunchKernel", a.cuLaunchKernel, true, &missing);
      // Memory, copies, streams and events: never used by libkiln itself, only by kiln's own tools
      // (verify --run) and tests, which check for them (DriverApi::has_tools). Optional, so that
      // libkiln serves through a driver (or a shim) that lacks them.
      bind(lib, "cuCtxSynchronize", a.cuCtxSynchronize, false, &missing);
      bind(lib, "cuMemAlloc_v2", a.cuMemAlloc, false, &missing);
      bind(lib, "cuMemFree_v2", a.cuMemFree, false, &missing);
      bind(lib, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, false, &missing);
      bind(lib, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, false, &missing);
      bind(lib, "cuMemsetD8_v2", a.cuMemsetD8, false, &missing);
      bind(lib, "cuStreamSynchronize", a.cuStreamSynchronize, false, &missing);
      bind(lib, "cuEventCreate", a.cuEventCreate, false, &missing);
      bind(lib, "cuEventRecord", a.cuEventRecord, false, &missing);
      bind(lib, "cuEventSynchronize", a.cuEventSynchronize, false, &missing);
      bind(lib, "cuEventElapsedTime", a.cuEventElapsedTime, false, &missing);
      bind(lib, "cuDeviceTotalMem_v2", a.cuDeviceTotalMem, false, &missing);
      bind(lib, "cuEventDestroy_v2", a.cuEventDestroy, false, &missing);
      bind(lib, "cuLaunchKernelEx", a.cuLaunchKernelEx, false, &missing);
      bind(lib, "cuTensorMapEncodeTiled", a.cuTensorMapEncodeTiled, false, &missing);
      // CUDA 12.0+: context-independent loading. Without it kiln uses cuModuleLoadDataEx.
      bool library = bind(lib, "cuLibraryLoadData", a.cuLibraryLoadData, false, &missing) &&
                     bind(lib, "cuLibraryUnload", a.cuLibraryUnload, false, &missing) &&
                     bind(lib, "cuLibraryGetKernel", a.cuLibraryGetKernel, false, &missing) &&
                     bind(lib, "cuKernelSetAttribute", a.cuKernelSetAttribute, false, &missing);
      if (!library) a.cuLibraryLoadData = nullptr;
      if (library) bind(lib, "cuKernelGetFunction", a.cuKernelGetFunction, false, &missing);
      if (!missing.empty()) {
        result.why = "the CUDA driver (" + path + ") lacks " + missing + "; it is too old for kiln";
      } else {
        CUresult r = a.cuInit(0);
        if (r != CUDA_SUCCESS) {
          result.why = "cuInit failed: " + d->describe(r);
          result.no_device = r == CUDA_ERROR_NO_DEVICE;
        } else if (a.cuDriverGetVersion(&d->version_) != CUDA_SUCCESS) {
          result.why = "cuDriverGetVersion failed";
        } else {
          result.driver = std::move(d);
        }
      }
      // The library stays loaded even on failure: dlclose of a half-initialised driver is
      // riskier than the few megabytes it keeps.
    }
    it = loaded.emplace(path, std::move(result)).first;
  }
  if (!it->second.driver) {
    if (why) *why = it->second.why;
    if (no_device) *no_device = it->second.no_device;
    return nullptr;
  }
  return it->second.driver.get();
}

std::string Driver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(r);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

}  // namespace kiln::cuda
