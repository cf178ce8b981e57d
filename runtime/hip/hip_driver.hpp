// The HIP runtime (libamdhip64), loaded with dlopen so that libkiln builds and runs where ROCm
// is absent: the functions kiln calls, bound once per library path and process. The twin of
// cuda_driver.
#pragma once

#include <cstddef>
#include <string>

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
  // Optional: memory, copies and events, for device tools (hip_tools.cpp, kiln verify --run);
  // libkiln serves without them.
  int (*hipMalloc)(void**, std::size_t) = nullptr;
  int (*hipFree)(void*) = nullptr;
  int (*hipMemset)(void*, int, std::size_t) = nullptr;
  int (*hipMemcpyHtoD)(void*, void*, std::size_t) = nullptr;
  int (*hipMemcpyDtoH)(void*, void*, std::size_t) = nullptr;
  int (*hipDeviceSynchronize)() = nullptr;
  int (*hipEventCreate)(void**) = nullptr;
  int (*hipEventRecord)(void*, void*) = nullptr;
  int (*hipEventSynchronize)(void*) = nullptr;
  int (*hipEventElapsedTime)(float*, void*, void*) = nullptr;
  int (*hipEventDestroy)(void*) = nullptr;
  int (*hipDeviceTotalMem)(std::size_t*, int) = nullptr;
  bool has_tools() const {
    return hipMalloc && hipFree && hipMemset && hipMemcpyHtoD && hipMemcpyDtoH && hipDeviceSynchronize && hipEventCreate &&
           hipEventRecord && hipEventSynchronize && hipEventElapsedTime && hipEventDestroy;
  }
  int runtime_version = 0;
};

// The HIP runtime's names of HipApi's optional tool functions, as load_api binds them.
const char* const* tool_symbols(std::size_t* count);

// The runtime at `path`, initialised, or null with why (`no_device`: it loaded but reports no
// AMD device). Loaded once per path; the answer, failures included, is kept for the process.
const HipApi* load_api(const std::string& path, std::string* why, bool* no_device);

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

}  // namespace kiln::hip
