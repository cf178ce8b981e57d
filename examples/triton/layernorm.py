"""LayerNorm forward in Triton (Triton's tutorial 05): fp16 rows, fp32 statistics, any m and n,
eps a float argument of the call.

    python -m kiln.export triton layernorm.py:layer_norm_fwd -o out/layernorm --target sm_90a
"""
import triton
import triton.language as tl

import kiln.export as kx


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        _mean += tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        tl.store(Y + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


def reference(x, y, w, b, mean, rstd, m, n, eps):
    """fp64 statistics, then the same rounding points as the kernel (fp32 maths, fp16 out)."""
    if hasattr(x, "double"):
        xd = x.double()
        mu, var = xd.mean(dim=1), xd.var(dim=1, unbiased=False)
        r = 1 / (var + eps).sqrt()
        mean.copy_(mu.float()), rstd.copy_(r.float())
        y.copy_(((xd - mu[:, None]) * r[:, None] * w.double() + b.double()).half())
    else:
        xd = x.astype("f8")
        mu, var = xd.mean(axis=1), xd.var(axis=1)
        r = 1 / (var + eps) ** 0.5
        mean[...], rstd[...] = mu, r
        y[...] = (xd - mu[:, None]) * r[:, None] * w.astype("f8") + b.astype("f8")


kiln_layer_norm_fwd = dict(
    name="layer_norm", package="layernorm-triton", description="y = layer_norm(x) * w + b, fp16, per-row mean and rstd (fp32)",
    params=[kx.tensor("x", "f16", ["m", "n"], "read"), kx.tensor("y", "f16", ["m", "n"], "write"),
            kx.tensor("w", "f16", ["n"], "read"), kx.tensor("b", "f16", ["n"], "read"),
            kx.tensor("mean", "f32", ["m"], "write"), kx.tensor("rstd", "f32", ["m"], "write"),
            kx.scalar("m"), kx.scalar("n"), kx.scalar("eps", "f32")],
    args={"X": "x", "Y": "y", "W": "w", "B": "b", "Mean": "mean", "Rstd": "rstd", "stride": "n", "N": "n"},
    constexprs={"BLOCK_SIZE": 1024}, options={"num_warps": 8},
    grid=["m"], shapes=[kx.Shape("rows", ranges={"m": [1, 1 << 20], "n": [1, 1 << 16]})],
    reference=reference, tolerance={"rtol": 1e-2, "atol": 1e-2},
    tests=[kx.Test("rows", {"m": 33, "n": 4096, "eps": 1e-5}), kx.Test("rows", {"m": 5, "n": 100, "eps": 1e-2})],
)
