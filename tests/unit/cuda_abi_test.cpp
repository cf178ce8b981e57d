// libkiln declares the few CUDA types and constants it needs instead of including cuda.h
// (so it builds without the toolkit). Here, where cuda.h exists, they must agree.
#include <cuda.h>

#include <cstdint>
#include <cstdio>

#include "cuda/cuda_driver.hpp"

namespace k = kiln::cuda;

static_assert(k::CUDA_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
static_assert(k::CUDA_ERROR_NOT_INITIALIZED == CUDA_ERROR_NOT_INITIALIZED, "NOT_INITIALIZED");
static_assert(k::CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "NO_DEVICE");
static_assert(k::CUDA_ERROR_INVALID_CONTEXT == CUDA_ERROR_INVALID_CONTEXT, "INVALID_CONTEXT");
static_assert(k::CUDA_ERROR_NO_BINARY_FOR_GPU == CUDA_ERROR_NO_BINARY_FOR_GPU, "NO_BINARY_FOR_GPU");
static_assert(k::CUDA_ERROR_INVALID_PTX == CUDA_ERROR_INVALID_PTX, "INVALID_PTX");
static_assert(k::CUDA_ERROR_UNSUPPORTED_PTX_VERSION == CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "UNSUPPORTED_PTX_VERSION");
static_assert(k::CUDA_ERROR_NOT_FOUND == CUDA_ERROR_NOT_FOUND, "NOT_FOUND");
static_assert(k::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "CC major");
static_assert(k::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "CC minor");
static_assert(k::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "smem");
static_assert(k::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "dyn smem");
static_assert(k::CU_JIT_INFO_LOG_BUFFER == CU_JIT_INFO_LOG_BUFFER, "JIT info log");
static_assert(k::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "JIT info size");
static_assert(k::CU_JIT_ERROR_LOG_BUFFER == CU_JIT_ERROR_LOG_BUFFER, "JIT error log");
static_assert(k::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "JIT error size");
static_assert(k::CU_EVENT_DEFAULT == CU_EVENT_DEFAULT, "event flags");
static_assert(sizeof(k::CUdeviceptr) == sizeof(CUdeviceptr), "CUdeviceptr");
static_assert(sizeof(k::CUdevice) == sizeof(CUdevice), "CUdevice");
static_assert(sizeof(k::CUresult) == sizeof(CUresult), "CUresult");
// cuLaunchKernelEx and cuTensorMapEncodeTiled: the layouts and values kiln passes.
#include <cstddef>
static_assert(k::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster attribute");
static_assert(sizeof(k::CUlaunchAttributeValue) == sizeof(CUlaunchAttributeValue), "CUlaunchAttributeValue");
static_assert(sizeof(k::CUlaunchAttribute) == sizeof(CUlaunchAttribute), "CUlaunchAttribute");
static_assert(offsetof(k::CUlaunchAttribute, value) == offsetof(CUlaunchAttribute, value), "attribute value");
static_assert(sizeof(k::CUlaunchConfig) == sizeof(CUlaunchConfig), "CUlaunchConfig");
static_assert(offsetof(k::CUlaunchConfig, hStream) == offsetof(CUlaunchConfig, hStream), "config stream");
static_assert(offsetof(k::CUlaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs), "config attrs");
static_assert(offsetof(k::CUlaunchConfig, numAttrs) == offsetof(CUlaunchConfig, numAttrs), "config numAttrs");
static_assert(sizeof(k::CUtensorMap) == sizeof(CUtensorMap) && alignof(k::CUtensorMap) == alignof(CUtensorMap), "CUtensorMap");
// The recipe stores CUDA's enumeration values (MANIFEST.md); spot-check each enumeration's ends.
static_assert(CU_TENSOR_MAP_DATA_TYPE_UINT8 == 0 && CU_TENSOR_MAP_DATA_TYPE_FLOAT16 == 6 &&
              CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9 && CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ == 12, "tensor map dtypes");
static_assert(CU_TENSOR_MAP_INTERLEAVE_NONE == 0 && CU_TENSOR_MAP_INTERLEAVE_32B == 2, "interleave");
static_assert(CU_TENSOR_MAP_SWIZZLE_NONE == 0 && CU_TENSOR_MAP_SWIZZLE_128B == 3, "swizzle");
static_assert(CU_TENSOR_MAP_L2_PROMOTION_NONE == 0 && CU_TENSOR_MAP_L2_PROMOTION_L2_256B == 3, "L2 promotion");
static_assert(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == 0 && CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA == 1, "OOB fill");
static_assert(sizeof(CUtensorMapDataType) == sizeof(int), "enums are passed as int");

int main() {
  // The stream handles that mean the current context's stream: cuda.h defines them as casts.
  if (reinterpret_cast<std::uintptr_t>(CU_STREAM_LEGACY) != k::CU_STREAM_LEGACY_VALUE ||
      reinterpret_cast<std::uintptr_t>(CU_STREAM_PER_THREAD) != k::CU_STREAM_PER_THREAD_VALUE) {
    std::printf("CU_STREAM_LEGACY or CU_STREAM_PER_THREAD differs from cuda.h\n");
    return 1;
  }
  std::printf("kiln's CUDA declarations match %s's cuda.h (CUDA_VERSION %d)\n", "this toolkit", CUDA_VERSION);
  return 0;
}
