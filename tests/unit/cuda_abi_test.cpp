// libkiln declares the few CUDA types and constants it needs instead of including cuda.h
// (so it builds without the toolkit). Here, where cuda.h exists, they must agree.
#include <cuda.h>

#include <cstdio>

#include "cuda_driver.hpp"

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

int main() {
  std::printf("kiln's CUDA declarations match %s's cuda.h (CUDA_VERSION %d)\n", "this toolkit", CUDA_VERSION);
  return 0;
}
