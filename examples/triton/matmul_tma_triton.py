"""An fp16 matmul through host-side tensor descriptors (TMA), as in Triton's tutorial
09-persistent-matmul (`matmul_kernel_tma`): C = A x B with fp32 accumulation, fp16 out.

A is M x K row-major, B is given transposed (N x K row-major, the layout the tutorial uses for
its TMA kernels), C is M x N row-major. The kernel takes one `TensorDescriptor` per tensor,
built on the host with `TensorDescriptor.from_tensor`, plus the sizes M, N, K.

M is left unspecialised (`do_not_specialize`) so that one compiled kernel serves every M:
otherwise Triton compiles a separate kernel for M == 1 (a constexpr) and for M % 16 == 0."""
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit(do_not_specialize=["M"])
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M
    offs_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([offs_m, k * BLOCK_K])
        b = b_desc.load([offs_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([offs_m, offs_n], acc.to(tl.float16))


# The tutorial's fp16 configuration for Hopper.
BLOCKS = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8)
OPTIONS = dict(num_warps=8, num_stages=3)


def grid(m, n):
    return (triton.cdiv(m, BLOCKS["BLOCK_M"]) * triton.cdiv(n, BLOCKS["BLOCK_N"]),)


def descriptors(a, b_t, c):
    """The host descriptors for A (M x K), B^T (N x K) and C (M x N)."""
    bm, bn, bk = BLOCKS["BLOCK_M"], BLOCKS["BLOCK_N"], BLOCKS["BLOCK_K"]
    return (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b_t, [bn, bk]),
            TensorDescriptor.from_tensor(c, [bm, bn]))


def matmul(a, b_t, c):
    """Triton's own launch: C = A x B, with B given as B^T (N x K)."""
    m, k = a.shape
    n = b_t.shape[0]
    return matmul_tma_kernel[grid(m, n)](*descriptors(a, b_t, c), m, n, k, **BLOCKS, **OPTIONS)


def reference(a, b_t, c, m, n, k):
    """C = A x B in float64, rounded to fp16 (PyTorch or NumPy)."""
    if hasattr(a, "double"):
        c.copy_((a.double() @ b_t.double().T).half())
    else:
        c[...] = a.astype("f8") @ b_t.astype("f8").T


# kiln.export.triton's arguments (python -m kiln.export triton matmul_tma_triton.py:matmul_tma_kernel).
# The call is (a, b_t, c, m, n, k); each descriptor parameter is a kx.desc over a tensor of the call.
# Triton specialises N and K on divisibility by 16 for the sample 8192^3 (M is do_not_specialize):
# that becomes the `where` of the range shapes.
import kiln.export as kx  # noqa: E402

_BM, _BN, _BK = BLOCKS["BLOCK_M"], BLOCKS["BLOCK_N"], BLOCKS["BLOCK_K"]
kiln_matmul_tma_kernel = dict(
    name="matmul_tma", package="matmul-tma-triton",
    description="C = A x B, B given as B^T (N x K): fp16, fp32 accumulation, host TensorDescriptors (TMA)",
    params=[kx.tensor("a", "f16", ["m", "k"], "read"), kx.tensor("b_t", "f16", ["n", "k"], "read"),
            kx.tensor("c", "f16", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"), kx.scalar("k")],
    args={"a_desc": kx.desc("a", [_BM, _BK]), "b_desc": kx.desc("b_t", [_BN, _BK]), "c_desc": kx.desc("c", [_BM, _BN]),
          "M": "m", "N": "n", "K": "k"},
    constexprs=BLOCKS, options=OPTIONS, sample={"m": 8192, "n": 8192, "k": 8192},
    grid=[f"cdiv(m, {_BM}) * cdiv(n, {_BN})"],
    shapes=[kx.Shape("m8192n8192k8192", values={"m": 8192, "n": 8192, "k": 8192}),
            kx.Shape("m256n256k256", values={"m": 256, "n": 256, "k": 256}),
            kx.Shape("any_m", ranges={"m": [1, 8192]}, values={"n": 8192, "k": 8192}),
            kx.Shape("general", ranges={"m": [1, 65536], "n": [16, 65536], "k": [16, 65536]})],
    tolerance={"rtol": 1e-2, "atol": 1e-2},  # fp16 out: one ulp of |c| <= 64 is 0.03... at k <= 272, |c| < 16
    reference=reference,
    tests=[kx.Test("m256n256k256"), kx.Test("general", {"m": 100, "n": 272, "k": 80})],
    targets=["sm_90a"],
)
