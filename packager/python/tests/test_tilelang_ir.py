"""pytest for kiln/export/tilelang_ir.py: a TileLang kernel's kiln description read from TileLang's
IR. Needs TileLang (0.1.15) and, for the tests that compile, nvcc (TileLang compiles its device
code with it; no GPU is needed: the targets are given as sm_90a and sm_80). Skipped otherwise.

    PYTHONPATH=<tilelang site> python -m pytest -q packager/python/tests/test_tilelang_ir.py
"""
import os
import pathlib
import shutil
import sys

import pytest

tilelang = pytest.importorskip("tilelang", reason="TileLang is not installed: the TileLang exporter is not tested")

REPO = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "tilelang"


from kiln.export import tilelang_ir as tl_ir  # noqa: E402


def _have_nvcc():
    from tilelang.env import CUDA_HOME

    return bool(shutil.which("nvcc") or (CUDA_HOME and os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc"))))


needs_nvcc = pytest.mark.skipif(not _have_nvcc(), reason="no nvcc: TileLang cannot compile the kernels")

_compiled = {}


def compile_uncached(prim_func, arch="sm_80", **kw):
    """tilelang.compile without TileLang's kernel cache (a cache hit has no lowered modules)."""
    tilelang.disable_cache()
    try:
        return tilelang.compile(prim_func, target={"kind": "cuda", "arch": arch}, **kw)
    finally:
        tilelang.enable_cache()


def compiled(key, arch="sm_90a"):
    """(kernel, prim_func, spec) of the example program `key` compiled for arch, uncached, once
    per test session; key "scale" is scale_program() (pointers, a float and an int scalar, a
    dynamic dimension)."""
    if (key, arch) not in _compiled:
        if key == "scale":
            prim_func = scale_program()
            _compiled[key, arch] = (compile_uncached(prim_func, arch), prim_func, dict(ranges={"n": [1, 1 << 20]}))
            return _compiled[key, arch]
        sys.path.insert(0, str(EXAMPLES))
        import flash_attention_tilelang as fa
        import matmul_relu_tilelang as mm
        from kiln.export import from_tilelang

        jit, args, spec = {
            "gemm": (mm.matmul_relu, mm._ARGS, {}),
            "gemm-cp-async": (mm.matmul_relu_cp_async, mm._ARGS, {}),
            "fa": (fa.flashattn, tuple(fa.SIZES.values()), {}),
            "gemm-dynamic-m": (mm.matmul_relu_dynamic_m, mm._ARGS[1:], {"ranges": {"m": [1, 65536]}}),
        }[key]
        prim_func, settings, _ = from_tilelang.program(jit, args, None)
        kernel, _ = from_tilelang.compile_for(prim_func, settings, {"kind": "cuda", "arch": arch})
        _compiled[key, arch] = (kernel, prim_func, spec)
    return _compiled[key, arch]


def scale_program():
    import tilelang.language as T

    n = T.dynamic("n")

    @T.prim_func
    def scale(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), alpha: T.float32, off: T.int32):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    B[bx * 128 + i] = A[bx * 128 + i] * alpha + T.Cast("float32", off)

    return scale


def describe(key, arch="sm_90a", ranges="spec"):
    kernel, prim_func, spec = compiled(key, arch)
    return tl_ir.describe(kernel, prim_func, spec.get("ranges") if ranges == "spec" else ranges)


F16_IN = dict(type="ptr", dtype="f16", access="read")
F16_OUT = dict(type="ptr", dtype="f16", access="write")


@needs_nvcc
def test_gemm_sm90a_tensor_maps_and_launch():
    info = describe("gemm")
    assert info["entry"] == "matmul_relu_kernel_kernel"
    assert info["params"] == [dict(name="A", **F16_IN), dict(name="B", **F16_IN), dict(name="C", **F16_OUT)]
    assert info["kernel_args"] == [
        dict(name="A_desc", tensor_map=dict(pointer="A", dims=[1024, 1024], strides=[2048], box=[32, 128],
                                            swizzle="64B", l2_promotion="128B")),
        dict(name="B_desc", tensor_map=dict(pointer="B", dims=[1024, 1024], strides=[2048], box=[64, 32],
                                            swizzle="128B", l2_promotion="128B")),
        "C",
    ]
    assert info["shape"] == dict(grid=[8, 8, 1], block=[256, 1, 1], shared_mem=49152)
    assert info["signature"] == [("tmap", "A_desc", "CUtensorMap", True), ("tmap", "B_desc", "CUtensorMap", True),
                                 ("ptr", "C", "float16", False)]
    assert info["dynamic"] == []


@needs_nvcc
def test_gemm_dynamic_m_range_and_grid_expression():
    info = describe("gemm-dynamic-m")
    assert info["params"][-1] == dict(name="m", type="i32")
    assert info["dynamic"] == ["m"]
    a_desc, b_desc, c, m = info["kernel_args"]
    assert a_desc["tensor_map"]["dims"] == [1024, "m"] and a_desc["tensor_map"]["strides"] == [2048]
    assert b_desc["tensor_map"]["dims"] == [1024, 1024]
    assert (c, m) == ("C", "m")
    # T.ceildiv(m, 128) lowers to FloorDiv(m + 127, 128): m >= 1, so C's truncating division agrees
    assert info["shape"] == dict(grid=[8, "(m + 127) / 128", 1], block=[256, 1, 1], shared_mem=49152,
                                 ranges={"m": [1, 65536]})
    assert describe("gemm-dynamic-m", ranges=None)["shape"]["ranges"] == {"m": [1, 2**31 - 1]}
    with pytest.raises(tl_ir.ExportError, match=r"\['q'\].*no dynamic dimensions"):
        describe("gemm-dynamic-m", ranges={"m": [1, 8], "q": [1, 2]})


@needs_nvcc
def test_flash_attention_sm90a_store_map_is_written():
    info = describe("fa")
    assert [a["name"] for a in info["kernel_args"]] == ["K_desc", "O_desc", "Q_desc", "V_desc"]
    o = info["kernel_args"][1]["tensor_map"]
    assert o == dict(pointer="O", dims=[128, 4096, 32, 8], strides=[8192, 256, 33554432], box=[64, 128, 1, 1],
                     swizzle="128B", l2_promotion="128B")
    # O is written only through tl.tma_store on O_desc
    assert [p["access"] for p in info["params"]] == ["read", "read", "read", "write"]
    assert info["shape"] == dict(grid=[32, 32, 8], block=[256, 1, 1], shared_mem=98304)


@needs_nvcc
def test_cp_async_and_sm80_take_the_pointers():
    for key, arch, block in (("gemm-cp-async", "sm_90a", 128), ("gemm", "sm_80", 128)):
        info = describe(key, arch)
        assert info["kernel_args"] is None, (key, arch)
        assert info["signature"] == [("ptr", "A", "float16", True), ("ptr", "B", "float16", True),
                                     ("ptr", "C", "float16", False)]
        assert info["shape"] == dict(grid=[8, 8, 1], block=[block, 1, 1], shared_mem=49152)
    fa = describe("fa", "sm_80")
    assert fa["kernel_args"] == ["K", "O", "Q", "V"]  # the kernel's parameter order is not the call's
    assert fa["shape"] == dict(grid=[32, 32, 8], block=[128, 1, 1], shared_mem=98304)


@needs_nvcc
def test_scalars_pass_through():
    info = describe("scale", "sm_80")
    assert info["params"] == [dict(name="A", type="ptr", dtype="f32", access="read"),
                              dict(name="B", type="ptr", dtype="f32", access="write"),
                              dict(name="alpha", type="f32"), dict(name="off", type="i32"), dict(name="n", type="i32")]
    assert info["kernel_args"] == ["A", "B", "alpha", "n", "off"]  # the kernel's order: n before off
    assert info["signature"][2:] == [("scalar", "alpha", "float32", False), ("scalar", "n", "int32", False),
                                     ("scalar", "off", "int32", False)]
    assert info["shape"] == dict(grid=["(n + 127) / 128", 1, 1], block=[128, 1, 1], shared_mem=0,
                                 ranges={"n": [1, 1 << 20]})


@needs_nvcc
def test_refusals():
    import tilelang.language as T

    @T.prim_func
    def two(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32)):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = B[bx * 128 + i] + 1.0

    kernel = compile_uncached(two)
    with pytest.raises(tl_ir.ExportError, match=r"lowers to 2 device kernels \(\['two_kernel', 'two_kernel_1'\]\)"):
        tl_ir.describe(kernel, two)
    # a PrimFunc that is not the one the kernel compiled
    gemm, _, _ = compiled("gemm")
    _, dynamic_m, _ = compiled("gemm-dynamic-m")
    with pytest.raises(tl_ir.ExportError, match="another device module"):
        tl_ir.describe(gemm, dynamic_m)


def test_expressions():
    """Host PrimExprs -> kiln expressions, on hand-built TIR (no compile)."""
    from tilelang import tvm

    tir = getattr(tvm, "tirx", None) or tvm.tir
    ns = "tirx" if hasattr(tvm, "tirx") else "tir"
    m, k, alpha = tir.Var("m", "int32"), tir.Var("k", "int64"), tir.Var("alpha", "float32")
    a_handle = tir.Var("A_handle", "handle")
    func = tir.PrimFunc([a_handle, alpha], tir.Evaluate(0),
                        buffer_map={a_handle: tir.decl_buffer((m, k), "float16", name="A")})

    def to(expr):
        return tl_ir.to_kiln(expr, func)

    assert to(tir.FloorDiv(m + 127, 128)) == "(m + 127) / 128"
    assert to(tir.Cast("int64", m) * k * 2) == "(m * k) * 2"
    assert to(tir.Min(m, 64) + tir.Max(m, 1)) == "min(m, 64) + max(m, 1)"
    assert to(tir.call_intrin("int32", f"{ns}.shift_left", m, 4)) == "m * 16"
    assert to(tir.IntImm("int32", 3) * 4 + tir.FloorMod(10, 4)) == 14
    with pytest.raises(tl_ir.ExportError, match=r"Select\) has no kiln equivalent"):
        to(tir.Select(m > 0, m, 1))
    with pytest.raises(tl_ir.ExportError, match="casts float32 to int32"):
        to(m + tir.Cast("int32", alpha))
    with pytest.raises(tl_ir.ExportError, match="'q' is neither a parameter of the program"):
        to(m + tir.Var("q", "int32"))
