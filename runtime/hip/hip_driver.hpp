// The HIP runtime (libamdhip64), loaded with dlopen so that libkiln builds and runs where ROCm
// is absent: the functions kiln calls, bound once per library path and process. The twin of
// cuda_driver.
#pragma once

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
  int runtime_version = 0;
};

// The runtime at `path`, initialised, or null with why (`no_device`: it loaded but reports no
// AMD device). Loaded once per path; the answer, failures included, is kept for the process.
const HipApi* load_api(const std::string& path, std::string* why, bool* no_device);

}  // namespace kiln::hip
