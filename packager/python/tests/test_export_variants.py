"""kiln.export.triton compiles ahead of time the divisibility specialisations Triton's JIT picks per
call (variants), on a real Triton kernel cross-compiled without a GPU; the archive carries them,
kiln inspect and preflight show them. (That libkiln launches the right one per call, at Triton's
speed, is checked on the GPU: ci/gpu-variants.sh.) Skipped without Triton."""
import json
import subprocess
import tomllib

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import kiln.export as kx  # noqa: E402
from kiln.export import triton_variants  # noqa: E402

from test_export import kiln_cli  # noqa: E402


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SPEC = dict(params=[kx.tensor("a", "f16", ["m", "k"], "read"), kx.tensor("b", "f16", ["k", "n"], "read"),
                    kx.tensor("c", "f16", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"), kx.scalar("k")],
            args={"M": "m", "N": "n", "K": "k", "stride_am": "k", "stride_bk": "n", "stride_cm": "n"},
            constexprs={"BM": 64, "BN": 64, "BK": 32}, options={"num_warps": 4}, grid=["cdiv(m, 64)", "cdiv(n, 64)"],
            shapes=[kx.Shape("any", ranges={"m": [1, 8192], "n": [1, 8192], "k": [1, 8192]})], targets=["sm_90a"])


def _kernel(done):
    return tomllib.loads(done.manifest)["kernel"][0]


ALIGNED = ["addr(a) % 16 == 0", "addr(b) % 16 == 0", "addr(c) % 16 == 0"]


def _without_a16(variants):
    """The variants without the last, `a16` (the build for aligned tensors alone), which exists
    only where the toolchain's code for aligned tensors differs from its code for misaligned
    ones (it did with Triton 3.6 here, and not on the H200's install), and whether it was there."""
    if variants and variants[-1]["name"] == "a16":
        assert variants[-1]["when"] == ALIGNED
        return variants[:-1], True
    return variants, False


def test_range_shapes_get_the_variants_whose_code_differs_most_specialised_first(tmp_path):
    done = kx.triton(gemm, tmp_path / "g", **SPEC)
    k = _kernel(done)
    # m's divisibility changes no code (it only masks rows); n (N, stride_bk, stride_cm) and k
    # (K, stride_am) do, alone and together. A value of 1 is Triton's constant: first, each with
    # the other expressions divisible and alone. Each was compiled for aligned tensors, as Triton
    # compiles a call whose addresses are multiples of 16, and says so; the build for aligned
    # tensors alone comes last, and the kernel's own code assumes no alignment at all.
    specialised, a16 = _without_a16(k["variant"])
    assert [(v["name"], v["when"]) for v in specialised] == [
        ("one.m.d16.n.k", ["m == 1", "n % 16 == 0", "k % 16 == 0"] + ALIGNED), ("one.m", ["m == 1"] + ALIGNED),
        ("one.n.d16.k", ["n == 1", "k % 16 == 0"] + ALIGNED), ("one.n", ["n == 1"] + ALIGNED),
        ("one.k.d16.n", ["k == 1", "n % 16 == 0"] + ALIGNED), ("one.k", ["k == 1"] + ALIGNED),
        ("d16.n.k", ["n % 16 == 0", "k % 16 == 0"] + ALIGNED), ("d16.n", ["n % 16 == 0"] + ALIGNED),
        ("d16.k", ["k % 16 == 0"] + ALIGNED)]
    for v in k["variant"]:
        assert v["code"] == [{"arch": "sm_90a", "file": f"gemm.sm_90a.{v['name']}.cubin"}]
        assert (tmp_path / "g" / v["code"][0]["file"]).read_bytes()[:4] == b"\x7fELF"
    files = [(tmp_path / "g" / f).read_bytes() for f in ["gemm.sm_90a.cubin"] +
             [v["code"][0]["file"] for v in k["variant"]]]
    assert len(set(files)) == 10 + a16  # every code object different
    general = json.loads((tmp_path / "g" / "triton-metadata.sm_90a.json").read_text())["specialisation"]
    assert [general[p] for p in ("a_ptr", "b_ptr", "c_ptr")] == [[], [], []], general  # none assumed aligned
    # A constant-1 build takes no parameter for what it folded: one.m's kernel no longer takes M;
    # the divisible ones take the kernel's own parameters.
    names = [e["name"] if isinstance(e, dict) else e for e in k["variant"][0]["kernel_args"]]
    assert "m" not in names and "n" in names and "k" in names
    assert "kernel_args" not in k["variant"][6]
    assert "where" not in k["shape"][0]  # the kernel's own code still takes every call


def test_the_archive_carries_them_and_inspect_and_preflight_show_them(tmp_path):
    cli = kiln_cli()
    kx.triton(gemm, tmp_path / "g", **SPEC)
    subprocess.run([cli, "keygen", "--out", str(tmp_path / "t")], check=True, capture_output=True)
    subprocess.run([cli, "pack", str(tmp_path / "g" / "kiln.toml"), "--key", str(tmp_path / "t.key"), "-o",
                    str(tmp_path / "g.kiln"), "-q"], check=True)
    shown = json.loads(subprocess.run([cli, "inspect", str(tmp_path / "g.kiln"), "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    whens = [v["when"] for v in shown["kernels"][0]["variants"]]
    whens = whens[:-1] if whens[-1] == ALIGNED else whens
    assert whens[-3:] == [["n % 16 == 0", "k % 16 == 0"] + ALIGNED, ["n % 16 == 0"] + ALIGNED, ["k % 16 == 0"] + ALIGNED]
    verified = subprocess.run([cli, "verify", str(tmp_path / "g.kiln"), "--trust", str(tmp_path / "t.pub")],
                              capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    pre = subprocess.run([cli, "preflight", str(tmp_path / "g.kiln"), "--trust", str(tmp_path / "t.pub"), "--target",
                          "sm_90"], capture_output=True, text=True)
    assert f"and its {len(shown['kernels'][0]['variants'])} variant(s) for the same target" in pre.stdout, pre.stdout


def test_the_user_bounds_and_chooses_them(tmp_path):
    # One code object, compiled for aligned tensors as Triton's common call: a call with an offset
    # view does not belong to the shape (it goes to the reference, with the reason).
    off = _kernel(kx.triton(gemm, tmp_path / "off", max_variants=0, **SPEC))
    assert "variant" not in off and off["shape"][0]["where"] == ALIGNED
    k = _kernel(kx.triton(gemm, tmp_path / "k", specialize=["K", "stride_am"], **SPEC))
    assert [v["when"] for v in _without_a16(k["variant"])[0]] == [["k == 1"] + ALIGNED, ["k % 16 == 0"] + ALIGNED]
    capped = tomllib.loads(kx.triton(gemm, tmp_path / "cap", max_variants=2, **SPEC).manifest)
    names = [v["name"] for v in capped["kernel"][0]["variant"]]
    assert len(names) <= 2 and "d16.n" in names, names
    assert capped["toolchain"]["variants_dropped"].startswith("k: ")
    assert "no room left under max_variants=2" in capped["toolchain"]["variants_dropped"]
    with pytest.raises(kx.ExportError, match=r"specialize names \['q'\]"):
        kx.triton(gemm, tmp_path / "bad", specialize=["q"], **SPEC)
    # A given sample is the user's own specialisation: no variants beside it, and what it assumes
    # (tensors aligned too) is a condition of the shape.
    sampled = _kernel(kx.triton(gemm, tmp_path / "s", sample={"m": 64, "n": 64, "k": 64}, **SPEC))
    assert "variant" not in sampled
    assert sampled["shape"][0]["where"][-3:] == ALIGNED and "n % 16 == 0" in sampled["shape"][0]["where"]


def test_alignment_conditions_share_entries_when_a_variant_has_no_room_left():
    checks = [f"addr(t{i}) % 16 == 0" for i in range(5)]
    assert triton_variants.joined_within(checks, 5, "v") == checks
    assert triton_variants.joined_within(checks, 2, "v") == [" && ".join(checks[:3]), " && ".join(checks[3:])]
    with pytest.raises(kx.ExportError, match="export with max_variants=0"):
        triton_variants.joined_within(checks, 0, "v")


class _B:
    def __init__(self, code):
        self.compiled = type("C", (), {"asm": {"cubin": code}})()


def test_the_plan_drops_what_changes_no_code_and_combinations_equal_to_smaller_ones():
    # Code as a function of which expressions are divisible: "a" matters alone, "b" only with "a",
    # "c" never.
    def compile_with(exprs):
        return [_B(b"x" + (b"A" if "a" in exprs else b"") + (b"B" if {"a", "b"} <= exprs else b""))]
    p = triton_variants.plan([_B(b"x")], ["a", "b", "c"], compile_with, 15)
    assert p.relevant == ["a", "b"] and p.dropped == []
    assert [v.divisible for v in p.variants] == [("a", "b"), ("a",)]  # ("b",) is the general code again
    assert triton_variants.plan([_B(b"x")], ["c"], lambda e: [_B(b"x")], 15).variants == []


@triton.jit
def strided_copy(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n), mask=offs < n)


def test_an_argument_given_as_the_constant_1_is_folded_as_triton_folds_it(tmp_path):
    # A unit stride passed as 1: Triton compiles it as a constant (the argument leaves the
    # kernel's parameter list), as its JIT does on every call; a value that is 1 only for the
    # sample is still refused (it would fold a value other calls change).
    done = kx.triton(strided_copy, tmp_path / "c", params=[kx.tensor("x", "f32", ["n"], "read"),
                                                          kx.tensor("y", "f32", ["n"], "write"), kx.scalar("n")],
                     args={"stride": 1}, constexprs={"BLOCK": 1024}, grid=["cdiv(n, 1024)"],
                     shapes=[kx.Shape("any", ranges={"n": [1, 1 << 24]})], targets=["sm_90a"])
    k = _kernel(done)
    names = [e["name"] if isinstance(e, dict) else e for e in k.get("kernel_args", [{"name": "x"}, {"name": "y"},
                                                                                 {"name": "n"}])]
    assert "stride" not in names
    aligned = ["addr(x) % 16 == 0", "addr(y) % 16 == 0"]
    whens = [v["when"] for v in k["variant"]]
    assert whens[:2] == [["n == 1"] + aligned, ["n % 16 == 0"] + aligned] and whens[2:] in ([], [aligned])
    with pytest.raises(kx.ExportError, match="constant for the sample call"):
        kx.triton(strided_copy, tmp_path / "d", params=[kx.tensor("x", "f32", ["n"], "read"),
                                                       kx.tensor("y", "f32", ["n"], "write"), kx.scalar("n"),
                                                       kx.scalar("s")],
                  constexprs={"BLOCK": 1024}, grid=["cdiv(n, 1024)"], args={"stride": "s"},
                  shapes=[kx.Shape("any", ranges={"n": [1, 1 << 24], "s": [1, 4]})], sample={"n": 17, "s": 1},
                  targets=["sm_90a"])
