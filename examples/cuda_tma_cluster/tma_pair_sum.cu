// A Hopper kernel of the kind TileLang and Triton emit, small enough to read: it takes a
// CUtensorMap by value (__grid_constant__), loads its tile with the Tensor Memory Accelerator
// into dynamic shared memory placed above 64 KiB, and adds the tile of its partner block in a
// 2x1x1 thread block cluster, read through distributed shared memory. It computes the right
// answer only when launched with a valid tensor map, with a 2x1x1 cluster and with more than
// 48 KiB of dynamic shared memory, so one run checks all three launch features of libkiln.
//
//   out[r][c] = in[r][c] + in[r][c ^ 32]   (the partner tile; 0 past the last column: the
//                                            tensor map fills out-of-bounds elements with zero)
//
// Written with PTX (sm_90) rather than CUDA's headers so that it builds with the nvcc wheels
// alone: the layout of CUtensorMap is 128 opaque bytes.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

constexpr int kTile = 32;                    // a 32 x 32 float tile: 4 KiB
constexpr unsigned kTileOffset = 64 * 1024;  // the tile lives above 64 KiB of dynamic shared memory

extern "C" __global__ void __launch_bounds__(256)
    tma_pair_sum(const __grid_constant__ TensorMap in, float* out, int rows, int cols) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long barrier;
  float* tile = reinterpret_cast<float*>(smem + kTileOffset);
  const unsigned bar = static_cast<unsigned>(__cvta_generic_to_shared(&barrier));
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  const int x0 = blockIdx.x * kTile, y0 = blockIdx.y * kTile;

  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kTile * kTile * 4) : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(&in)), "r"(x0), "r"(y0), "r"(bar)
        : "memory");
  }
  __syncthreads();  // the barrier is initialised before anyone waits on it
  asm volatile(
      "{\n .reg .pred done;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n @!done bra WAIT_%=;\n}" ::"r"(bar)
      : "memory");

  unsigned rank = 0, partner = 0;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(partner) : "r"(dst), "r"(rank ^ 1u));
  for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
    float theirs = 0;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(theirs) : "r"(partner + 4u * static_cast<unsigned>(i)));
    const int r = y0 + i / kTile, c = x0 + i % kTile;
    if (r < rows && c < cols) out[static_cast<long long>(r) * cols + c] = tile[i] + theirs;
  }
  // The partner reads this block's shared memory: neither leaves before both are done.
  asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
