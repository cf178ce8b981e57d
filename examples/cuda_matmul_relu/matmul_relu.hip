// The seed's kernel for AMD GPUs: the same C = relu(A * B) as matmul_relu.cu, in HIP (the
// source is the same CUDA-style C++; hipcc builds it for each AMD target ID the build asks for).
#include <hip/hip_runtime.h>
#define TILE 16

extern "C" __global__ void matmul_relu_f32(const float* __restrict__ a, const float* __restrict__ b,
                                           float* __restrict__ c, int m, int n, int k) {
  __shared__ float a_tile[TILE][TILE];
  __shared__ float b_tile[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    int a_col = t + threadIdx.x, b_row = t + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] = (row < m && a_col < k) ? a[row * k + a_col] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] = (b_row < k && col < n) ? b[b_row * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TILE; ++i) acc += a_tile[threadIdx.y][i] * b_tile[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc > 0.0f ? acc : 0.0f;  // the ReLU epilogue
}
