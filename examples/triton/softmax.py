"""Row softmax in Triton (a program per row, the row in one block), for any m and n <= 1024.

    python -m kiln.export triton softmax.py:softmax_kernel -o out/softmax --target sm_80 --target sm_90a
"""
import triton
import triton.language as tl

import kiln.export as kx


@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * y_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def reference(y, x, m, n):
    """The call's meaning, for kiln's reference route and the test vectors (PyTorch or NumPy)."""
    if hasattr(x, "softmax"):
        y.copy_(x.double().softmax(dim=1).to(y.dtype))
    else:
        import numpy as np
        e = np.exp(x.astype("f8") - x.max(axis=1, keepdims=True))
        y[...] = e / e.sum(axis=1, keepdims=True)


kiln_softmax_kernel = dict(
    name="softmax", package="softmax-triton", description="y = softmax(x) along rows, float32, n <= 1024",
    params=[kx.tensor("y", "f32", ["m", "n"], "write"), kx.tensor("x", "f32", ["m", "n"], "read"),
            kx.scalar("m"), kx.scalar("n")],
    args={"x_row_stride": "n", "y_row_stride": "n", "n_cols": "n"},  # y_ptr, x_ptr: the tensors y, x
    constexprs={"BLOCK_SIZE": 1024}, options={"num_warps": 4},
    grid=["m"], shapes=[kx.Shape("rows", ranges={"m": [1, 1 << 20], "n": [1, 1024]})],
    reference=reference, tests=[kx.Test("rows", {"m": 64, "n": 1000}), kx.Test("rows", {"m": 7, "n": 3})],
)
