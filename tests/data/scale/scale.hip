// The scale kernel (y = a * x) in HIP, built by Debian's hipcc in the build for several AMD
// target IDs: the code-object readers and the target-ID matching are tested on its output.
#include <hip/hip_runtime.h>
extern "C" __global__ void scale_f32(float* y, const float* x, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
