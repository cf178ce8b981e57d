"""bf16 and fp8 through kiln.export on a real Triton kernel, cross-compiled without a GPU: dtypes
named as Triton and PyTorch name them, vectors holding raw bits that kiln pack accepts, values
rounded to the type from a NumPy reference; the fnuz formats refused by name. Skipped without Triton."""
import subprocess
import tomllib

import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import kiln.export as kx  # noqa: E402
from kiln.export import narrow  # noqa: E402
from test_export import kiln_cli  # noqa: E402


@triton.jit
def dequant_scale(x_ptr, y_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * scale).to(tl.bfloat16), mask=mask)


def reference(x, y, scale, n):  # NumPy: float32 arrays of the fp8 values; y is rounded to bf16 by kiln
    y[:] = x * scale


SPEC = dict(params=[kx.tensor("x", "fp8e4nv", ["n"], "read"), kx.tensor("y", "torch.bfloat16", ["n"], "write"),
                    kx.scalar("scale", "float32"), kx.scalar("n")],
            args={"x_ptr": "x", "y_ptr": "y"}, constexprs={"BLOCK": 256}, grid=["cdiv(n, 256)"],
            shapes=[kx.Shape("flat", ranges={"n": [1, 1 << 20]})], reference=reference, reference_kind="numpy",
            tests=[kx.Test("flat", {"n": 1000, "scale": 0.5})], targets=["sm_90a"])


def test_an_fp8_in_bf16_out_kernel_exports_with_raw_bit_vectors_that_pack(tmp_path):
    done = kx.triton(dequant_scale, tmp_path, **SPEC)
    kernel = tomllib.loads(done.manifest)["kernel"][0]
    assert [(p["name"], p.get("dtype", p["type"])) for p in kernel["params"]] == [
        ("x", "f8e4m3"), ("y", "bf16"), ("scale", "f32"), ("n", "i32")]
    assert kernel["tolerance"] == {"rtol": 2e-2, "atol": 2e-2}, "bf16's default for the written tensor"
    test = kernel["test"][0]
    x = np.load(tmp_path / test["inputs"]["x"])
    y = np.load(tmp_path / test["outputs"]["y"])
    assert x.dtype == np.uint8 and y.dtype == np.uint16 and x.shape == y.shape == (1000,)
    values = narrow.decode(np, x, "f8e4m3")
    assert np.all(np.abs(values) <= 1) and len(np.unique(x)) > 50, "generated in [-1, 1], as fp8 codes"
    assert np.array_equal(y, narrow.encode(np, values.astype(np.float32) * np.float32(0.5), "bf16", "y"))
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    packed = subprocess.run([cli, "pack", str(tmp_path / "kiln.toml"), "--key", str(tmp_path / "t.key"),
                             "-o", str(tmp_path / "dq.kiln")], capture_output=True, text=True)
    assert packed.returncode == 0, packed.stderr


def test_fp8_formats_kiln_does_not_carry_are_refused_by_name():
    with pytest.raises(kx.ExportError, match="fp8e4b15 is an 8-bit float kiln does not carry"):
        kx.tensor("x", "fp8e4b15", ["n"])
    with pytest.raises(kx.ExportError, match="torch.float8_e4m3fnuz is an 8-bit float kiln does not carry"):
        kx.tensor("x", "torch.float8_e4m3fnuz", ["n"])
    assert kx.tensor("x", "torch.float8_e5m2", ["n"]).dtype == "f8e5m2" and kx.scalar("s", "fp16").type == "f16"


def test_a_value_past_the_types_range_is_refused_not_made_infinite():
    with pytest.raises(kx.ExportError, match="tensor 'y': 500.0 is outside the f8e4m3 range"):
        narrow.encode(np, [1.0, 500.0], "f8e4m3", "tensor 'y'")
    with pytest.raises(kx.ExportError, match="NaN or infinite"):
        narrow.encode(np, [np.nan], "bf16", "tensor 'y'")
