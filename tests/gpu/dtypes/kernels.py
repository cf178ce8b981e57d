"""Two kernels as LLM serving writes them, in the dtypes it serves in, for kiln.export and
`kiln verify --run` on the H200 (ci/gpu-dtypes.sh): an RMSNorm over bf16 rows and a GEMM of fp8
(E4M3) operands into bf16. Exported as written: fp8 pointers, bf16 tensors, vectors from the
references below (PyTorch where it is installed, else NumPy)."""
import triton
import triton.language as tl

import kiln.export as kx


@triton.jit
def rmsnorm_bf16(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * n + offs, (x * rstd * w).to(tl.bfloat16), mask=mask)


@triton.jit
def gemm_fp8(a_ptr, b_ptr, c_ptr, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        a = tl.load(a_ptr + rm[:, None] * k + (k0 + rk)[None, :], mask=(rm[:, None] < m) & ((k0 + rk)[None, :] < k),
                    other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * n + rn[None, :], mask=((k0 + rk)[:, None] < k) & (rn[None, :] < n),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < m) & (rn[None, :] < n))


def _float(t):
    return t.float() if hasattr(t, "float") else t  # a torch tensor of bf16/fp8, or NumPy float32 values


def rmsnorm_reference(x, w, y, m, n, eps):
    xf, wf = _float(x), _float(w)
    rstd = 1.0 / ((xf * xf).sum(-1)[..., None] / n + eps) ** 0.5
    return xf * rstd * wf  # rounded to bf16 by kiln.export


def gemm_reference(a, b, c, m, n, k):
    return _float(a) @ _float(b)  # exact products of fp8 values, fp32 sums; rounded to bf16 by kiln.export


RMSNORM = dict(
    name="rmsnorm_bf16", package="llm-dtypes-rmsnorm", description="RMSNorm over bf16 rows (fp32 maths)",
    params=[kx.tensor("x", "torch.bfloat16", ["m", "n"], "read"), kx.tensor("w", "bf16", ["n"], "read"),
            kx.tensor("y", "bf16", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"), kx.scalar("eps", "f32")],
    args={"x_ptr": "x", "w_ptr": "w", "y_ptr": "y"}, constexprs={"BLOCK": 4096}, options={"num_warps": 8},
    grid=["m"], shapes=[kx.Shape("rows", ranges={"m": [1, 1 << 20], "n": [1, 4096]})], reference=rmsnorm_reference,
    tests=[kx.Test("rows", {"m": 64, "n": 4096, "eps": 1e-6}), kx.Test("rows", {"m": 3, "n": 1000, "eps": 1e-5})],
)

GEMM = dict(
    name="gemm_fp8", package="llm-dtypes-gemm", description="C = A @ B, A and B fp8 (E4M3), C bf16, fp32 accumulation",
    params=[kx.tensor("a", "fp8e4nv", ["m", "k"], "read"), kx.tensor("b", "torch.float8_e4m3fn", ["k", "n"], "read"),
            kx.tensor("c", "bf16", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"), kx.scalar("k")],
    args={"a_ptr": "a", "b_ptr": "b", "c_ptr": "c"}, constexprs={"BM": 128, "BN": 128, "BK": 64},
    options={"num_warps": 8, "num_stages": 3}, grid=["cdiv(m, 128)", "cdiv(n, 128)"],
    shapes=[kx.Shape("mnk", ranges={"m": [1, 16384], "n": [1, 16384], "k": [64, 16384]}, where=["k % 64 == 0"])],
    sample={"m": 512, "n": 512, "k": 512}, reference=gemm_reference,
    tests=[kx.Test("mnk", {"m": 512, "n": 512, "k": 512}), kx.Test("mnk", {"m": 256, "n": 384, "k": 1024})],
)
