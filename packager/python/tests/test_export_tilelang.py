"""kiln.export.tilelang on the repository's TileLang programs, cross-compiled without a GPU
(TileLang lowers and nvcc compiles for the given arch). Skipped without TileLang or nvcc."""
import pathlib
import subprocess
import sys
import tomllib

import pytest

pytest.importorskip("tilelang", reason="TileLang is not installed: the TileLang exporter is not tested")
from test_tilelang_ir import needs_nvcc  # noqa: E402
from test_export import kiln_cli  # noqa: E402

import kiln.export as kx  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples" / "tilelang"))
import matmul_relu_tilelang as mm  # noqa: E402

pytestmark = needs_nvcc


def test_the_seed_gemm_for_hopper_with_vectors_packs(tmp_path):
    done = kx.tilelang(mm.matmul_relu, tmp_path, **mm.kiln_matmul_relu)
    parsed = tomllib.loads(done.manifest)
    k = parsed["kernel"][0]
    assert done.archs == ["sm_90a"] and k["code"] == [{"arch": "sm_90a", "file": "matmul_relu.sm_90a.cubin"}]
    assert [a["name"] if isinstance(a, dict) else a for a in k["kernel_args"]] == ["A_desc", "B_desc", "C"]
    assert k["kernel_args"][0]["tensor_map"]["pointer"] == "A"
    assert k["shape"] == [{"name": "fixed", "grid": [8, 8, 1], "block": [256, 1, 1], "shared_mem": 49152}]
    assert k["sources"][0] == "matmul_relu_tilelang.py" and (tmp_path / "matmul_relu_tilelang.py").exists()
    assert k["test"][0]["outputs"] == {"C": "matmul_relu.test0.fixed.C.expected.npy"}
    assert parsed["toolchain"]["framework"] == "tilelang" and parsed["toolchain"]["targets"] == "sm_90a"
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    packed = subprocess.run([cli, "pack", str(tmp_path / "kiln.toml"), "--key", str(tmp_path / "t.key"),
                             "-o", str(tmp_path / "mm.kiln")], capture_output=True, text=True)
    assert packed.returncode == 0, packed.stderr


def test_ampere_lowers_to_pointers_and_is_refused_beside_hopper(tmp_path):
    spec = dict(mm.kiln_matmul_relu, tests=(), targets=["sm_80"])
    k = tomllib.loads(kx.tilelang(mm.matmul_relu, tmp_path / "a", **spec).manifest)["kernel"][0]
    assert k["code"][0]["arch"] == "sm_80" and "kernel_args" not in k  # the kernel takes (A, B, C) as they are
    with pytest.raises(kx.ExportError, match="sm_90a and sm_80 lower to different kernel_args"):
        kx.tilelang(mm.matmul_relu, tmp_path / "b", **dict(spec, targets=["sm_80", "sm_90a"]))


def test_a_dynamic_dimension_becomes_a_range_shape_with_its_tests(tmp_path):
    done = kx.tilelang(mm.matmul_relu_dynamic_m, tmp_path, **mm.kiln_matmul_relu_dynamic_m)
    k = tomllib.loads(done.manifest)["kernel"][0]
    assert [p["name"] for p in k["params"]] == ["A", "B", "C", "m"]
    assert k["shape"][0]["ranges"] == {"m": [1, 65536]} and k["shape"][0]["name"] == "any_m"
    assert [t["values"] for t in k["test"]] == [{"m": 1000}, {"m": 64}]
    import numpy as np
    assert np.load(tmp_path / k["test"][0]["inputs"]["A"]).shape == (1000, 1024)


def test_a_jit_function_needs_its_arguments(tmp_path):
    with pytest.raises(kx.ExportError, match="pass args="):
        kx.tilelang(mm.matmul_relu, tmp_path, targets=["sm_90a"])
    with pytest.raises(kx.ExportError, match="this export declares one shape, 'fixed'"):
        kx.tilelang(mm.matmul_relu, tmp_path, **dict(mm.kiln_matmul_relu, tests=[kx.Test("other")]))
