"""Triton kernels and a host module for the capture/serve tests: compiled for a target with
Triton's own compile() (no GPU needed), as the JIT compiles them for a call."""
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@triton.jit
def neg_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
SCALE_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}

# A CPython extension as small as Triton's own host modules are large: built by Triton's
# compile_module_from_src with the host C compiler, cached under sha256(source + platform).
PROBE_MODULE = r"""
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "kiln_probe", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_kiln_probe(void) { PyObject* m = PyModule_Create(&def);
  if (m) PyModule_AddIntConstant(m, "ANSWER", %d); return m; }
"""


def compile_add(arch=90, block=128, num_warps=4, fn=None):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    src = ASTSource(fn or add_kernel, dict(SIGNATURE), {(4,): block})
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps})


def compile_scale(arch=90):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    return triton.compile(ASTSource(scale_kernel, dict(SCALE_SIGNATURE), {(3,): 64}),
                          target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})


def compile_neg(arch=90):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    return triton.compile(ASTSource(neg_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {(2,): 64}),
                          target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})


def build_probe(answer=42):
    from triton.runtime import build
    return build.compile_module_from_src(PROBE_MODULE % answer, "kiln_probe")
