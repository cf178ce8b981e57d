// The CUDA Driver API, loaded at run time with dlopen("libcuda.so.1"), so that libkiln builds
// and runs on machines with no GPU and no driver (every call then routes to the reference).
// Only the types and constants kiln uses are declared here, with the values of CUDA's cuda.h
// (tests/unit/cuda_abi_test.cpp checks them against cuda.h where the toolkit is installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace kiln::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUlib_st;
struct CUkern_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUlibrary = CUlib_st*;
using CUkernel = CUkern_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9;
constexpr int CU_SHAREDMEM_CARVEOUT_MAX_SHARED = 100;
constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr unsigned CU_EVENT_DEFAULT = 0;
// The stream handles that name the calling thread's current context's stream rather than a
// stream of their own (cuda.h: NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
constexpr std::uintptr_t CU_STREAM_LEGACY_VALUE = 0x1;
constexpr std::uintptr_t CU_STREAM_PER_THREAD_VALUE = 0x2;

// cuLaunchKernelEx's configuration (cuda.h: CUlaunchConfig, CUlaunchAttribute), with the one
// attribute kiln sets: the cluster dimension.
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
union CUlaunchAttributeValue {
  char pad[64];
  struct {
    unsigned x, y, z;
  } clusterDim;
};
struct CUlaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  CUlaunchAttributeValue value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
// CUtensorMap: 128 opaque bytes; the enumerations are passed as ints.
struct alignas(128) CUtensorMap {  // CUDA 13 aligns it to 128 (12.x: 64)
  unsigned long long opaque[16];
};

// The entry points, by the ABI names cuda.h maps its macros to (cuMemAlloc is cuMemAlloc_v2).
struct DriverApi {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;           // _v2
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;                   // _v2
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;                   // _v2
  CUresult (*cuCtxSynchronize)() = nullptr;
  // Context-independent loading (CUDA 12.0+); absent on older drivers.
  CUresult (*cuLibraryLoadData)(CUlibrary*, const void*, int*, void**, unsigned, int*, void**, unsigned) = nullptr;
  CUresult (*cuLibraryUnload)(CUlibrary) = nullptr;
  CUresult (*cuLibraryGetKernel)(CUkernel*, CUlibrary, const char*) = nullptr;
  CUresult (*cuKernelSetAttribute)(int, int, CUkernel, CUdevice) = nullptr;
  // The CUfunction of a CUkernel in the current context (CUDA 12.0+); optional: launches then
  // go through the CUkernel alone.
  CUresult (*cuKernelGetFunction)(CUfunction*, CUkernel) = nullptr;
  // The per-context path, for drivers without cuLibrary*.
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**) = nullptr;
  // Hopper launches (CUDA 12.0+), optional: a kernel that needs them is refused at resolution
  // where they are missing (cuda_features.hpp).
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, int, unsigned, void*, const unsigned long long*,
                                     const unsigned long long*, const unsigned*, const unsigned*, int, int, int,
                                     int) = nullptr;
  // Memory, copies, streams and events: used by kiln's own GPU tests and tools, and by libkiln
  // for the scratch memory kernels declare.
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t) = nullptr;            // _v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                           // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, std::size_t) = nullptr;  // _v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, std::size_t) = nullptr;    // _v2
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, std::size_t) = nullptr;  // _v2
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;                          // _v2
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice) = nullptr;         // _v2; for attestations

  // Whether the driver has the memory, copy, stream and event entry points above, which only
  // kiln's tools and tests use; libkiln does not need them.
  bool has_tools() const {
    return cuCtxSynchronize && cuMemAlloc && cuMemFree && cuMemcpyHtoD && cuMemcpyDtoH && cuMemsetD8 &&
           cuStreamSynchronize && cuEventCreate && cuEventRecord && cuEventSynchronize && cuEventElapsedTime &&
           cuEventDestroy;
  }
};

// The process's one handle on the driver library: loaded once, never unloaded (unloading a
// GPU driver under live contexts is unsafe, and the process keeps it anyway).
class Driver {
 public:
  // Loads `path` (empty: "libcuda.so.1") and calls cuInit(0) on first use. Thread-safe.
  // Returns null when the library or a required symbol is missing or cuInit fails, with the
  // reason in *why and whether it was "no driver" or "no device" in *no_device.
  static const Driver* get(const std::string& path, std::string* why, bool* no_device);

  const DriverApi& api() const { return api_; }
  int version() const { return version_; }  // 13000 for CUDA 13.0
  bool has_library_api() const { return api_.cuLibraryLoadData != nullptr; }
  // "CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available...)".
  std::string describe(CUresult r) const;

 private:
  DriverApi api_;
  int version_ = 0;
};

// Makes a context (a device's primary one) current for a scope when it is not already, and
// restores the caller's on leaving.
class ContextScope {
 public:
  ContextScope(const DriverApi& api, CUcontext wanted) : api_(api) {
    CUcontext current = nullptr;
    if (api_.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == wanted) {
      current_ = true;
    } else {
      pushed_ = current_ = api_.cuCtxPushCurrent(wanted) == CUDA_SUCCESS;
    }
  }
  ~ContextScope() {
    if (pushed_) {
      CUcontext popped = nullptr;
      api_.cuCtxPopCurrent(&popped);
    }
  }
  // Whether the wanted context is current in the scope (false where pushing it failed).
  bool current() const { return current_; }

 private:
  const DriverApi& api_;
  bool pushed_ = false;
  bool current_ = false;
};

}  // namespace kiln::cuda
