"""The seed's kernel in Triton: C = relu(A x B), float32 in, float32 out, row-major and
contiguous (strides derived from the sizes, so the launch passes only pointers and sizes)."""
import triton
import triton.language as tl


@triton.jit
def matmul_relu_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // grid_n, pid % grid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")  # exact fp32, comparable with a CPU reference
    acc = tl.maximum(acc, 0.0)  # the ReLU epilogue
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


BLOCKS = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)


def reference(a, b, c, m, n, k):
    """C = relu(A x B) in float64, rounded to float32 (PyTorch or NumPy)."""
    if hasattr(a, "double"):
        c.copy_((a.double() @ b.double()).clamp_min(0).float())
    else:
        c[...] = (a.astype("f8") @ b.astype("f8")).clip(min=0)


# kiln.export.triton's arguments (python -m kiln.export triton matmul_relu_triton.py:matmul_relu_kernel):
# the seed's GEMM for every m, n, k (Triton assumes nothing of them: the default sample avoids
# multiples of 16), with two tests.
import kiln.export as kx  # noqa: E402

kiln_matmul_relu_kernel = dict(
    name="matmul_relu", package="matmul-relu-triton", description="C = relu(A x B), float32, compiled by Triton",
    params=[kx.tensor("a", "f32", ["m", "k"], "read"), kx.tensor("b", "f32", ["k", "n"], "read"),
            kx.tensor("c", "f32", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"), kx.scalar("k")],
    args={"M": "m", "N": "n", "K": "k"}, constexprs=BLOCKS,
    grid=[f"cdiv(m, {BLOCKS['BLOCK_M']}) * cdiv(n, {BLOCKS['BLOCK_N']})"],
    shapes=[kx.Shape("any", ranges={"m": [1, 16384], "n": [1, 16384], "k": [1, 16384]})],
    tolerance={"rtol": 1e-4, "atol": 1e-4}, reference=reference,
    tests=[kx.Test("any", {"m": 256, "n": 256, "k": 256}), kx.Test("any", {"m": 100, "n": 37, "k": 300})],
)
