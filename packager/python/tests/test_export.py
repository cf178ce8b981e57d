"""kiln.export's framework-independent parts: expressions, declarations, kiln.toml, test vectors
from a reference. Needs NumPy; the kiln command (KILN_CLI, else build/bin/kiln) for packing."""
import os
import pathlib
import subprocess
import tomllib

import numpy as np
import pytest

import kiln.export as kx
from kiln.export import manifest, vectors
from kiln.export.expr import evaluate

ROOT = pathlib.Path(__file__).resolve().parents[3]


def kiln_cli():
    cli = os.environ.get("KILN_CLI") or str(ROOT / "build" / "bin" / "kiln")
    if not os.path.exists(cli):
        pytest.skip(f"no kiln command at {cli} (set KILN_CLI)")
    return cli


def test_expressions_follow_c():
    env = {"m": 7, "n": 8192}
    assert evaluate("cdiv(m, 128) * cdiv(n, 256)", env) == 32
    assert [evaluate(e, {}) for e in ("cdiv(7, 2)", "cdiv(-7, 2)", "cdiv(7, -2)", "cdiv(-7, -2)", "cdiv(8, 2)")] == \
        [4, -3, -3, 4, 4]
    assert evaluate("-7 / 2", env) == -3 and evaluate("-7 % 2", env) == -1
    assert evaluate("m % 16 == 0 || n % 16 == 0", env) and not evaluate("m > 7 && n > 0", env)
    with pytest.raises(kx.ExportError, match="unknown name 'q'"):
        evaluate("q + 1", env)
    with pytest.raises(kx.ExportError, match="division by zero"):
        evaluate("m / (n - 8192)", env)
    with pytest.raises(kx.ExportError, match="not in kiln's expression language"):
        evaluate("m ** 2", env)


def test_declarations_refuse_what_cannot_be_right():
    with pytest.raises(kx.ExportError, match="unknown dtype 'complex64'"):
        kx.tensor("x", "complex64", ["m"])
    assert kx.tensor("x", "float32", ["m"]).dtype == "f32"  # PyTorch's (and Triton's) names are kiln's too
    with pytest.raises(kx.ExportError, match="access"):
        kx.tensor("x", "f32", ["m"], "rw")
    with pytest.raises(kx.ExportError, match="both values and ranges"):
        kx.Shape("s", values={"m": 1}, ranges={"m": [1, 2]})
    with pytest.raises(kx.ExportError, match="empty"):
        kx.Shape("s", ranges={"m": [5, 1]})
    from kiln.export.declare import check_call
    params = [kx.tensor("x", "f32", ["m", "n"], "read"), kx.scalar("m")]
    with pytest.raises(kx.ExportError, match=r"\['n'\], which are not integer scalars"):
        check_call(params, [], [])
    params.append(kx.scalar("n"))
    with pytest.raises(kx.ExportError, match="leaves \\['n'\\] without a value"):
        check_call(params, [kx.Shape("s", values={"m": 4})], [])
    with pytest.raises(kx.ExportError, match="not declared"):
        check_call(params, [kx.Shape("s", values={"m": 4, "n": 4})], [kx.Test("t")])


def _relu_add(y, x, b, m, n, alpha):
    y[...] = np.maximum(x + b[None, :], 0) * alpha


PARAMS = [kx.tensor("y", "f32", ["m", "n"], "write"), kx.tensor("x", "f32", ["m", "n"], "read"),
          kx.tensor("b", "f32", ["n"], "read"), kx.scalar("m"), kx.scalar("n"), kx.scalar("alpha", "f32")]
SHAPES = [kx.Shape("any", ranges={"m": [1, 64], "n": [1, 64]}, where=["n % 2 == 0"])]


def test_vectors_come_from_the_reference_seeded_and_shaped():
    tests = [kx.Test("any", {"m": 3, "n": 4, "alpha": 0.5}), kx.Test("any", {"m": 5, "n": 2, "alpha": 2.0}, seed=7)]
    tables, files = vectors.build_tests("k", PARAMS, SHAPES, tests, _relu_add, "numpy")
    assert tables[0] == {"shape": "any", "values": {"m": 3, "n": 4, "alpha": 0.5},
                         "inputs": {"x": "k.test0.any.x.npy", "b": "k.test0.any.b.npy"},
                         "outputs": {"y": "k.test0.any.y.expected.npy"}}
    load = lambda name: np.load(__import__("io").BytesIO(files[name]))  # noqa: E731
    x, b, y = load("k.test0.any.x.npy"), load("k.test0.any.b.npy"), load("k.test0.any.y.expected.npy")
    assert x.shape == (3, 4) and b.shape == (4,) and x.dtype == np.float32
    assert np.array_equal(y, np.maximum(x + b, 0) * np.float32(0.5))
    assert np.abs(x).max() <= 1 and len(np.unique(x)) == 12  # uniform in [-1, 1), not constant
    again, _ = vectors.build_tests("k", PARAMS, SHAPES, tests, _relu_add, "numpy")
    again_files = vectors.build_tests("k", PARAMS, SHAPES, tests, _relu_add, "numpy")[1]
    assert again == tables and again_files == files  # seeded: the same bytes every time
    assert load("k.test1.any.x.npy").shape == (5, 2)


def test_vectors_refuse_a_call_outside_its_shape_and_missing_values():
    bad = [(kx.Test("any", {"m": 3, "n": 3, "alpha": 1.0}), "breaks the shape's condition"),
           (kx.Test("any", {"m": 65, "n": 2, "alpha": 1.0}), "outside the shape's range"),
           (kx.Test("any", {"m": 3, "n": 2}), "no value for scalar 'alpha'"),
           (kx.Test("any", {"m": 3, "n": 2, "alpha": 1.0, "q": 1}), "not scalars of the call")]
    for test, message in bad:
        with pytest.raises(kx.ExportError, match=message):
            vectors.build_tests("k", PARAMS, SHAPES, [test], _relu_add, "numpy")
    with pytest.raises(kx.ExportError, match="no reference"):
        vectors.build_tests("k", PARAMS, SHAPES, [kx.Test("any", {"m": 2, "n": 2, "alpha": 1.0})], None)


def test_a_returning_reference_and_a_failing_one():
    def returns(y, x, b, m, n, alpha):
        return np.full((m, n), 3.0)
    tables, files = vectors.build_tests("k", PARAMS, SHAPES, [kx.Test("any", {"m": 2, "n": 2, "alpha": 1.0})],
                                        returns, "numpy")
    y = np.load(__import__("io").BytesIO(files[tables[0]["outputs"]["y"]]))
    assert y.dtype == np.float32 and (y == 3).all()

    def wrong_shape(y, x, b, m, n, alpha):
        return np.zeros(3)
    with pytest.raises(kx.ExportError, match=r"gave shape \[3\], the call's is \[2, 2\]"):
        vectors.build_tests("k", PARAMS, SHAPES, [kx.Test("any", {"m": 2, "n": 2, "alpha": 1.0})], wrong_shape, "numpy")

    def raises(*args):
        raise ValueError("boom")
    with pytest.raises(kx.ExportError, match="the reference failed: ValueError: boom"):
        vectors.build_tests("k", PARAMS, SHAPES, [kx.Test("any", {"m": 2, "n": 2, "alpha": 1.0})], raises, "numpy")


def test_rendered_manifest_packs_and_verify_run_is_offered(tmp_path):
    """A manifest written by kiln.export for a hand-made PTX kernel, with float test values, packs
    with the real kiln command (its parser is the judge of the format)."""
    ptx = (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 y, .param .u64 x, "
           ".param .u64 b, .param .u32 m, .param .u32 n, .param .f32 alpha)\n{\n ret;\n}\n")
    tables, files = vectors.build_tests("k", PARAMS, SHAPES, [kx.Test("any", {"m": 4, "n": 6, "alpha": -1.5})],
                                        _relu_add, "numpy")
    text = manifest.render(package="t", revision="r1", sequence=3, description="d", toolchain={"framework": "test"},
                           extra_files=[], generator="a test",
                           kernel={"name": "k", "entry": "k", "params": [p.manifest() for p in PARAMS],
                                   "kernel_args": None, "code": [{"arch": "compute_90", "file": "k.ptx"}],
                                   "tolerance": vectors.default_tolerance(PARAMS),
                                   "shapes": [{"name": "any", "ranges": SHAPES[0].ranges, "where": SHAPES[0].where,
                                               "grid": ["m", 1, 1], "block": [128, 1, 1], "shared_mem": 0}],
                                   "tests": tables})
    parsed = tomllib.loads(text)
    assert parsed["kernel"][0]["test"][0]["values"] == {"m": 4, "n": 6, "alpha": -1.5}
    assert parsed["kernel"][0]["tolerance"] == {"rtol": 1e-4, "atol": 1e-5}
    manifest.write_files(tmp_path, {**files, "kiln.toml": text, "k.ptx": ptx})
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    packed = subprocess.run([cli, "pack", str(tmp_path / "kiln.toml"), "--key", str(tmp_path / "t.key"), "-o",
                             str(tmp_path / "t.kiln")], capture_output=True, text=True)
    assert packed.returncode == 0, packed.stderr
    shown = subprocess.run([cli, "inspect", str(tmp_path / "t.kiln")], capture_output=True, text=True).stdout
    assert "testdata" in shown and "k.test0.any.y.expected.npy" in shown
