"""kiln.export.triton on real Triton kernels, cross-compiled on a machine without a GPU (Triton
compiles and its bundled ptxas assembles for any NVIDIA target). Skipped without Triton."""
import os
import pathlib
import subprocess
import sys
import tomllib

import pytest

triton = pytest.importorskip("triton")
import kiln.export as kx  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples" / "triton"))
import layernorm  # noqa: E402
import matmul_relu_triton as relu  # noqa: E402
import matmul_tma_triton as tma  # noqa: E402
import softmax  # noqa: E402

from test_export import kiln_cli  # noqa: E402


def _kernel(text):
    return tomllib.loads(text)["kernel"][0]


def _tma(tmp_path, target, **extra):
    spec = dict(tma.kiln_matmul_tma_kernel, targets=[target], tests=(), **extra)
    return kx.triton(tma.matmul_tma_kernel, tmp_path, **spec)


def test_tma_descriptors_become_tensor_maps_and_scalars(tmp_path):
    done = _tma(tmp_path, "sm_90a")
    assert done.archs == ["sm_90a"]
    k = _kernel(done.manifest)
    args = k["kernel_args"]
    assert [a["name"] for a in args][:5] == ["a_desc", "a_desc_shape0", "a_desc_shape1", "a_desc_stride0",
                                            "a_desc_stride1"]
    assert args[0]["tensor_map"] == {"pointer": "a", "dtype": "f16", "dims": ["k", "m"], "strides": ["k * 2"],
                                     "box": [64, 128], "swizzle": "128B", "l2_promotion": "128B", "oob_fill": "zero"}
    c = next(e for e in args if e["name"] == "c_desc")["tensor_map"]
    assert c["box"] == [64, 128]  # Triton stores the 128x256 block as 128x64 boxes
    assert [e["name"] for e in args][-5:] == ["m", "n", "k", "global_scratch", "profile_scratch"]
    shapes = {s["name"]: s for s in k["shape"]}
    assert shapes["m8192n8192k8192"]["grid"] == [2048, 1, 1]
    assert shapes["any_m"]["grid"][0] == "cdiv(m, 128) * cdiv(n, 256)" and "where" not in shapes["any_m"]
    assert shapes["general"]["where"] == ["n % 16 == 0", "k % 16 == 0"]
    assert shapes["general"]["shared_mem"] == done.compiled["sm_90a"].metadata.shared
    assert k["code"] == [{"arch": "sm_90a", "file": "matmul_tma.sm_90a.cubin"}]
    cubin = (tmp_path / "matmul_tma.sm_90a.cubin").read_bytes()
    assert cubin[:4] == b"\x7fELF" and cubin == done.compiled["sm_90a"].asm["cubin"]


def test_without_tma_descriptors_are_pointers_shapes_strides_and_padding(tmp_path):
    k = _kernel(_tma(tmp_path, "sm_80").manifest)
    assert [e["name"] for e in k["kernel_args"]][:11] == [
        "a", "a_desc_shape0_i64", "a_desc_shape1_i64", "a_desc_stride0_i64", "a_desc_stride1_i64",
        "a_desc_padding_nan", "a_desc_shape0", "a_desc_shape1", "a_desc_stride0", "a_desc_stride1", "b_t"]


def test_targets_with_different_abis_are_refused_together(tmp_path):
    spec = dict(tma.kiln_matmul_tma_kernel, targets=["sm_80", "sm_90a"], tests=())
    with pytest.raises(kx.ExportError, match="sm_90a and sm_80 compile to different kernel parameters"):
        kx.triton(tma.matmul_tma_kernel, tmp_path, **spec)


def test_one_kernel_for_several_targets_with_tests_from_the_reference(tmp_path):
    done = kx.triton(softmax.softmax_kernel, tmp_path, targets=["sm_80", "sm_90a", "sm_100a"],
                     **softmax.kiln_softmax_kernel)
    k = _kernel(done.manifest)
    assert [c["arch"] for c in k["code"]] == ["sm_80", "sm_90a", "sm_100a"]
    # each cubin is for its target: the ELF header's e_flags carry the SM number
    for arch in ("sm_80", "sm_90a", "sm_100a"):
        cubin = (tmp_path / f"softmax.{arch}.cubin").read_bytes()
        assert cubin[:4] == b"\x7fELF"
        assert f".target {arch}" in (tmp_path / f"softmax.{arch}.ptx").read_text()
    assert k["kernel_args"][:5] == [{"name": "y"}, {"name": "x"}, {"name": "n"},
                                    {"name": "y_row_stride", "type": "i32", "value": "n"},
                                    {"name": "n_cols", "type": "i32", "value": "n"}]
    assert k["shape"][0]["ranges"] == {"m": [1, 1 << 20], "n": [1, 1024]} and "where" not in k["shape"][0]
    assert [t["values"] for t in k["test"]] == [{"m": 64, "n": 1000}, {"m": 7, "n": 3}]
    pin = tomllib.loads(done.manifest)["toolchain"]
    assert pin["triton"] == triton.__version__ and pin["targets"] == "sm_80 sm_90a sm_100a"
    assert pin["specialisation"] == "none" and "bundled with triton" in pin["ptxas"]
    import numpy as np
    x = np.load(tmp_path / "softmax.test0.rows.x.npy")
    y = np.load(tmp_path / "softmax.test0.rows.y.expected.npy")
    assert x.shape == (64, 1000) and np.allclose(y.sum(axis=1), 1, atol=1e-5) and (y > 0).all()


def test_float_scalars_and_repeated_scalars(tmp_path):
    done = kx.triton(layernorm.layer_norm_fwd, tmp_path, targets=["sm_90a"], **layernorm.kiln_layer_norm_fwd)
    k = _kernel(done.manifest)
    assert k["kernel_args"][6:9] == [{"name": "n"}, {"name": "N", "type": "i32", "value": "n"}, {"name": "eps"}]
    assert k["test"][0]["values"] == {"m": 33, "n": 4096, "eps": 1e-5}
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    packed = subprocess.run([cli, "pack", str(tmp_path / "kiln.toml"), "--key", str(tmp_path / "t.key"),
                             "-o", str(tmp_path / "ln.kiln")], capture_output=True, text=True)
    assert packed.returncode == 0, packed.stderr


def test_the_default_sample_assumes_nothing_and_a_given_one_becomes_conditions(tmp_path):
    spec = dict(relu.kiln_matmul_relu_kernel, tests=())
    k = _kernel(kx.triton(relu.matmul_relu_kernel, tmp_path / "a", targets=["sm_90a"], **spec).manifest)
    assert "where" not in k["shape"][0]
    spec["sample"] = {"m": 64, "n": 64, "k": 64}
    k = _kernel(kx.triton(relu.matmul_relu_kernel, tmp_path / "b", targets=["sm_90a"], **spec).manifest)
    assert k["shape"][0]["where"] == ["m % 16 == 0", "n % 16 == 0", "k % 16 == 0", "addr(a) % 16 == 0",
                                      "addr(b) % 16 == 0", "addr(c) % 16 == 0"]


def test_a_test_breaking_a_condition_its_own_sample_added_is_refused_by_export(tmp_path):
    """kiln pack would refuse it later, naming a condition the user never wrote; the export says
    where the condition came from."""
    pytest.importorskip("numpy")
    spec = dict(relu.kiln_matmul_relu_kernel, sample={"m": 64, "n": 64, "k": 64})
    shape = spec["shapes"][0].name
    spec["tests"] = [kx.Test(shape, {"m": 100, "n": 64, "k": 64})]
    with pytest.raises(kx.ExportError) as e:
        kx.triton(relu.matmul_relu_kernel, tmp_path / "t", targets=["sm_90a"], **spec)
    assert "breaks the condition 'm % 16 == 0', added by the compiled specialisation (Triton assumed it from the " \
           "sample {'m': 64, 'n': 64, 'k': 64})" in str(e.value)
    assert not (tmp_path / "t" / "kiln.toml").exists()


def test_a_sample_of_one_is_refused(tmp_path):
    spec = dict(relu.kiln_matmul_relu_kernel, tests=(), sample={"m": 1, "n": 64, "k": 64})
    with pytest.raises(kx.ExportError, match="constant"):
        kx.triton(relu.matmul_relu_kernel, tmp_path, targets=["sm_90a"], **spec)


def test_a_fixed_shape_breaking_the_specialisation_is_refused(tmp_path):
    with pytest.raises(kx.ExportError, match="specialisation"):
        kx.triton(
            tma.matmul_tma_kernel, tmp_path,
            **dict(tma.kiln_matmul_tma_kernel, tests=(), shapes=[kx.Shape("odd", values={"m": 8, "n": 100, "k": 64})]))


def test_clusters_multiply_grid_x(tmp_path):
    done = kx.triton(
        tma.matmul_tma_kernel, tmp_path,
        **dict(tma.kiln_matmul_tma_kernel, tests=(), options=dict(tma.OPTIONS, num_ctas=2)))
    shapes = {s["name"]: s for s in _kernel(done.manifest)["shape"]}
    assert shapes["m8192n8192k8192"]["grid"] == [4096, 1, 1] and shapes["m8192n8192k8192"]["cluster"] == [2, 1, 1]
    assert shapes["any_m"]["grid"][0] == "(cdiv(m, 128) * cdiv(n, 256)) * 2"


def test_mistakes_are_named(tmp_path):
    spec = dict(softmax.kiln_softmax_kernel, tests=(), targets=["sm_90a"])
    with pytest.raises(kx.ExportError, match=r"args names \['nope'\], which are not parameters of softmax_kernel"):
        kx.triton(softmax.softmax_kernel, tmp_path, **dict(spec, args={"nope": "n"}))
    with pytest.raises(kx.ExportError, match="kernel parameter 'n_cols' of softmax_kernel is not a call parameter"):
        kx.triton(softmax.softmax_kernel, tmp_path, **dict(spec, args={"x_row_stride": "n", "y_row_stride": "n"}))
    with pytest.raises(kx.ExportError, match="constexpr BLOCK_SIZE of softmax_kernel has no value"):
        kx.triton(softmax.softmax_kernel, tmp_path, **dict(spec, constexprs={}))
    with pytest.raises(kx.ExportError, match="AMD targets are not supported"):
        kx.triton(softmax.softmax_kernel, tmp_path, **dict(spec, targets=["gfx942"]))
    with pytest.raises(kx.ExportError, match=r"target 'sm_999': no NVIDIA GPU has compute capability 99.9"):
        kx.triton(softmax.softmax_kernel, tmp_path, **dict(spec, targets=["sm_90a", "sm_999"]))
    with pytest.raises(kx.ExportError, match="Triton could not compile softmax_kernel for sm_90: CompilationError"):
        kx.triton(softmax.softmax_kernel, tmp_path, **dict(spec, args=dict(spec["args"], y_ptr="n")))
    with pytest.raises(kx.ExportError, match="not a @triton.jit function"):
        kx.triton(len, tmp_path, **spec)


def test_an_autotuned_kernel_exports_the_chosen_config(tmp_path):
    tuned = triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
                                     triton.Config({"BLOCK_SIZE": 1024}, num_warps=8)], key=["n_cols"])(
        softmax.softmax_kernel)
    spec = dict(softmax.kiln_softmax_kernel, tests=(), targets=["sm_90a"], constexprs=None, options=None)
    with pytest.raises(kx.ExportError, match="autotuned over 2 configs"):
        kx.triton(tuned, tmp_path, **spec)
    k = _kernel(kx.triton(tuned, tmp_path, config=1, **spec).manifest)
    assert k["shape"][0]["block"] == [256, 1, 1]


def test_the_command_line_exports_and_packs(tmp_path):
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    env = dict(os.environ, KILN_CLI=cli, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-m", "kiln.export", "triton", str(ROOT / "examples/triton/softmax.py") +
                          ":softmax_kernel", "-o", str(tmp_path / "sm"), "--target", "sm_80", "--target", "sm_90a",
                          "--pack", str(tmp_path / "t.key")], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "wrote" in run.stdout and (tmp_path / "sm.kiln").exists()
    shown = subprocess.run([cli, "inspect", str(tmp_path / "sm.kiln")], capture_output=True, text=True).stdout
    assert "sm_80" in shown and "sm_90a" in shown
    bad = subprocess.run([sys.executable, "-m", "kiln.export", "triton", str(ROOT / "examples/triton/softmax.py") +
                          ":nothing", "-o", str(tmp_path / "x")], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "defines no 'nothing'" in bad.stderr


def test_sample_dtypes_are_stable_objects(tmp_path):
    # Triton caches what a dtype object maps to by the object: a short-lived stand-in whose id()
    # a later one reused once made an f32 tensor compile as fp16 (CI, in this order of exports).
    from kiln.export.triton_compile import _FakeDtype
    assert _FakeDtype("f16") is _FakeDtype("f16") and _FakeDtype("f32") is not _FakeDtype("f16")
    assert {_FakeDtype("f32"): 1}[_FakeDtype("f32")] == 1 and str(_FakeDtype("bf16")) == "torch.bfloat16"
    import gc
    _tma(tmp_path / "fp16", "sm_90a")
    gc.collect()
    for i, sample in enumerate(({"m": 64, "n": 64, "k": 64}, {"m": 65, "n": 66, "k": 67})):
        spec = dict(relu.kiln_matmul_relu_kernel, tests=(), sample=sample)
        kx.triton(relu.matmul_relu_kernel, tmp_path / f"f32-{i}", targets=["sm_90a"], **spec)


def test_an_i64_size_triton_types_i32_is_passed_converted(tmp_path):
    spec = dict(softmax.kiln_softmax_kernel, tests=(), targets=["sm_90a"],
                params=[kx.tensor("y", "f32", ["m", "n"], "write"), kx.tensor("x", "f32", ["m", "n"], "read"),
                        kx.scalar("m", "i64"), kx.scalar("n", "i64")])
    k = _kernel(kx.triton(softmax.softmax_kernel, tmp_path, **spec).manifest)
    assert k["kernel_args"][2:5] == [{"name": "x_row_stride", "type": "i32", "value": "n"},
                                     {"name": "y_row_stride", "type": "i32", "value": "n"},
                                     {"name": "n_cols", "type": "i32", "value": "n"}]
