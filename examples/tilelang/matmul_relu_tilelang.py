"""The seed's TileLang kernel, as in TileLang's README: T.Pipelined loads into shared memory,
T.gemm accumulation in a register fragment, and a ReLU epilogue. float16 in and out, float32
accumulation; the sizes and tiles are fixed at compile time (one specialisation).

Two lowerings of the same program:
  matmul_relu           TileLang's default for Hopper: T.copy becomes TMA (the kernel takes
                        `__grid_constant__ const CUtensorMap A_desc, B_desc` by value, encoded by
                        the host at every launch; kiln encodes them from the manifest's
                        `kernel_args` tensor_map recipes) and the pipeline is warp-specialised
                        (a producer warpgroup issues the TMA loads, a consumer warpgroup the
                        wgmma), 256 threads.
  matmul_relu_cp_async  TMA lowering and warp specialisation disabled: plain pointers, cp.async
                        loads, 128 threads (what kiln could carry before tensor maps).

matmul_relu_dynamic_m is the same kernel with M left to the call (T.dynamic), for the
exporter's dynamic-shape path (M becomes an i32 parameter of the kiln call)."""
import tilelang
import tilelang.language as T

CP_ASYNC = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}


def matmul_relu_program(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def matmul_relu_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)  # the ReLU epilogue
            T.copy(C_local, C[by * block_M, bx * block_N])

    return matmul_relu_kernel


@tilelang.jit
def matmul_relu(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    return matmul_relu_program(M, N, K, block_M, block_N, block_K, dtype, accum_dtype)


@tilelang.jit(pass_configs=CP_ASYNC)
def matmul_relu_cp_async(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    return matmul_relu_program(M, N, K, block_M, block_N, block_K, dtype, accum_dtype)


@tilelang.jit
def matmul_relu_dynamic_m(N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    return matmul_relu_program(T.dynamic("m"), N, K, block_M, block_N, block_K, dtype, accum_dtype)


SIZES = dict(M=1024, N=1024, K=1024)
TILES = dict(block_M=128, block_N=128, block_K=32)


def reference(A, B, C, m=None):
    """C = relu(A x B) in float64, rounded to float16 (PyTorch or NumPy); `m` is the dynamic M."""
    if hasattr(A, "double"):
        C.copy_((A.double() @ B.double()).clamp_min(0).half())
    else:
        C[...] = (A.astype("f8") @ B.astype("f8")).clip(min=0)


# kiln.export.tilelang's arguments (python -m kiln.export tilelang matmul_relu_tilelang.py:matmul_relu):
# the program's arguments, the reference and one test on the fixed shape.
import kiln.export as kx  # noqa: E402

_ARGS = (SIZES["M"], SIZES["N"], SIZES["K"], TILES["block_M"], TILES["block_N"], TILES["block_K"])
kiln_matmul_relu = dict(args=_ARGS, name="matmul_relu", package="matmul-relu-tilelang",
                        description="C = relu(A x B), float16 1024^3, TileLang's default Hopper lowering (TMA, "
                                    "warp-specialised)",
                        reference=reference, tests=[kx.Test("fixed")], tolerance={"rtol": 1e-2, "atol": 5e-2},
                        targets=["sm_90a"])
kiln_matmul_relu_cp_async = dict(kiln_matmul_relu, package="matmul-relu-tilelang-cp-async",
                                 description="C = relu(A x B), float16 1024^3, cp.async lowering (no TMA)")
kiln_matmul_relu_dynamic_m = dict(args=_ARGS[1:], name="matmul_relu", package="matmul-relu-tilelang-dynamic-m",
                                  description="C = relu(A x B), float16, M dynamic, N = K = 1024, TMA",
                                  ranges={"m": [1, 65536]}, reference=reference,
                                  tests=[kx.Test("any_m", {"m": 1000}), kx.Test("any_m", {"m": 64})],
                                  tolerance={"rtol": 1e-2, "atol": 5e-2}, targets=["sm_90a"])
