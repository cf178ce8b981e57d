"""CPU-only checks of the generic exporter (no GPU: Triton compiles for a given target).
    python3 -m pytest -q examples/triton/test_kiln_triton.py     (skipped without Triton)"""
import pathlib
import sys
import tomllib

import pytest

triton = pytest.importorskip("triton")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kiln_triton as kt  # noqa: E402
import export_triton_tma as tma  # noqa: E402
import matmul_tma_triton as source  # noqa: E402


def test_expressions_follow_c():
    env = {"m": 7, "n": 8192}
    assert kt.evaluate("cdiv(m, 128) * cdiv(n, 256)", env) == 32
    assert kt.evaluate("cdiv(-7, 2)", env) == -3 and kt.evaluate("-7 / 2", env) == -3 and kt.evaluate("-7 % 2", env) == -1
    assert kt.evaluate("m % 16 == 0 || n % 16 == 0", env)
    with pytest.raises(kt.ExportError):
        kt.evaluate("q + 1", env)


def _export(tmp_path, arch):
    compiled, text = kt.export(
        tmp_path, package="t", kernel_name="mm", fn=source.matmul_tma_kernel, params=tma.PARAMS, args=tma.ARGS,
        constexprs=source.BLOCKS, options=source.OPTIONS, sample=tma.SAMPLE, grid=tma.GRID, shapes=tma.SHAPES,
        target=(arch, 32))
    return compiled, tomllib.loads(text)["kernel"][0]


def test_tma_descriptors_become_tensor_maps_and_scalars(tmp_path):
    compiled, k = _export(tmp_path, 90)
    args = k["kernel_args"]
    assert [a["name"] for a in args][:5] == ["a_desc", "a_desc_shape0", "a_desc_shape1", "a_desc_stride0",
                                            "a_desc_stride1"]
    a = args[0]["tensor_map"]
    assert a == {"pointer": "a", "dtype": "f16", "dims": ["k", "m"], "strides": ["k * 2"], "box": [64, 128],
                 "swizzle": "128B", "l2_promotion": "128B", "oob_fill": "zero"}
    c = next(e for e in args if e["name"] == "c_desc")["tensor_map"]
    assert c["box"] == [64, 128]  # Triton stores the 128x256 block as 128x64 boxes
    assert [e["name"] for e in args][-5:] == ["m", "n", "k", "global_scratch", "profile_scratch"]
    shapes = {s["name"]: s for s in k["shape"]}
    assert shapes["m8192n8192k8192"]["grid"] == [2048, 1, 1]
    assert shapes["any_m"]["grid"][0] == "cdiv(m, 128) * cdiv(n, 256)" and "where" not in shapes["any_m"]
    assert shapes["general"]["where"] == ["n % 16 == 0", "k % 16 == 0"]
    assert shapes["general"]["shared_mem"] == compiled.metadata.shared


def test_without_tma_descriptors_are_pointers_shapes_strides_and_padding(tmp_path):
    _, k = _export(tmp_path, 80)
    names = [e["name"] for e in k["kernel_args"]]
    assert names[:11] == ["a", "a_desc_shape0_i64", "a_desc_shape1_i64", "a_desc_stride0_i64", "a_desc_stride1_i64",
                          "a_desc_padding_nan", "a_desc_shape0", "a_desc_shape1", "a_desc_stride0", "a_desc_stride1",
                          "b_t"]


def test_a_sample_of_one_is_refused(tmp_path):
    import matmul_relu_triton as relu  # M is specialised there: a sample m = 1 makes it a constant
    params = [kt.tensor("a", "f32", ["m", "k"], "read"), kt.tensor("b", "f32", ["k", "n"], "read"),
              kt.tensor("c", "f32", ["m", "n"], "write"), kt.scalar("m"), kt.scalar("n"), kt.scalar("k")]
    with pytest.raises(kt.ExportError, match="constant"):
        kt.export(tmp_path, package="t", kernel_name="mm", fn=relu.matmul_relu_kernel, params=params,
                  args={"a_ptr": "a", "b_ptr": "b", "c_ptr": "c", "M": "m", "N": "n", "K": "k"},
                  constexprs=relu.BLOCKS, options={}, sample={"m": 1, "n": 64, "k": 64}, grid=["cdiv(m, 64)"],
                  shapes=[], target=(90, 32))


def test_a_fixed_shape_breaking_the_specialisation_is_refused(tmp_path):
    with pytest.raises(kt.ExportError, match="specialisation"):
        kt.export(tmp_path, package="t", kernel_name="mm", fn=source.matmul_tma_kernel, params=tma.PARAMS,
                  args=tma.ARGS, constexprs=source.BLOCKS, options=source.OPTIONS, sample=tma.SAMPLE, grid=tma.GRID,
                  shapes=[kt.Shape("odd", values={"m": 8, "n": 100, "k": 64})], target=(90, 32))


def test_clusters_multiply_grid_x(tmp_path):
    compiled, text = kt.export(
        tmp_path, package="t", kernel_name="mm", fn=source.matmul_tma_kernel, params=tma.PARAMS, args=tma.ARGS,
        constexprs=source.BLOCKS, options=dict(source.OPTIONS, num_ctas=2), sample=tma.SAMPLE, grid=tma.GRID,
        shapes=tma.SHAPES, target=(90, 32))
    shapes = {s["name"]: s for s in tomllib.loads(text)["kernel"][0]["shape"]}
    assert shapes["m8192n8192k8192"]["grid"] == [4096, 1, 1] and shapes["m8192n8192k8192"]["cluster"] == [2, 1, 1]
    assert shapes["any_m"]["grid"][0] == "(cdiv(m, 128) * cdiv(n, 256)) * 2"
