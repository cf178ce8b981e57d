// A kernel that needs scratch memory it does not allocate (as Triton's global_scratch kernels
// do): each program stages its 256 inputs in its own slice of the scratch buffer and reads them
// back reversed, so the result is right only when libkiln passed a buffer of 1 KiB per program
// (slices of different programs must not overlap) aligned as the manifest asks (512 bytes).
//   out[b * 256 + t] = 2 * in[b * 256 + 255 - t]   (+ 1000 where the buffer is misaligned)
extern "C" __global__ void __launch_bounds__(256)
    scratch_roundtrip(const float* in, float* out, int n, float* scratch) {
  float* mine = scratch + static_cast<long long>(blockIdx.x) * blockDim.x;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) mine[threadIdx.x] = 2.0f * in[i];
  __syncthreads();
  const bool aligned = reinterpret_cast<unsigned long long>(scratch) % 512 == 0;
  if (i < n) out[i] = mine[blockDim.x - 1 - threadIdx.x] + (aligned ? 0.0f : 1000.0f);
}
