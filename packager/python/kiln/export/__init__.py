"""kiln.export: a compiled kernel, as the framework made it, into a kiln package folder that
`kiln pack` seals.

    import kiln.export as kx
    kx.triton(my_kernel, "out/", params=[kx.tensor("x", "f32", ["m", "n"], "read"), ...],
              grid=["m"], shapes=[kx.Shape("any", ranges={"m": [1, 65536]})],
              targets=["sm_80", "sm_90a"], reference=torch_reference, tests=[kx.Test("any", {"m": 300})])

packager/python/README.md documents every argument; `python -m kiln.export --help` is the same
from the command line.
"""
from .declare import Desc, Scalar, Shape, Tensor, Test, desc, scalar, tensor
from .errors import ExportError
from .expr import evaluate

__all__ = ["triton", "tilelang", "Tensor", "Scalar", "Desc", "Shape", "Test", "tensor", "scalar", "desc",
           "ExportError", "evaluate"]


def triton(fn, out, **kwargs):
    """Exports a @triton.jit (or @triton.autotune) kernel: see kiln.export.from_triton.export."""
    from . import from_triton
    return from_triton.export(fn, out, **kwargs)


def tilelang(kernel, out, **kwargs):
    """Exports a TileLang kernel (@tilelang.jit or a compiled JITKernel): see kiln.export.from_tilelang.export."""
    from . import from_tilelang
    return from_tilelang.export(kernel, out, **kwargs)
