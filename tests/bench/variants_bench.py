#!/usr/bin/env python3
"""Kernels exported with kiln.export's documented defaults (range shapes, no sample) against
Triton's own launch of the same kernel on the same call, on aligned and unaligned calls, on the
GPU: a split-K GEMM (f16 in, fp32 partial sums), an fp8 (E4M3) GEMM and a memory-bound bf16
RMSNorm. For each call: the variant libkiln takes (Kernel.explain), whether kiln's output is
bit-identical to Triton's, and the median time of each (triton.testing.do_bench: CUDA events,
L2 flushed between runs) side by side in the same process, with the ratio. Each kernel is also
exported with max_variants=0 (one code object, the general one: what kiln did before variants),
so the table shows what the variants buy. An "offset" call passes a tensor that starts one element
into its allocation (not 16-byte aligned): Triton compiles it without its alignment assumption,
kiln runs the kernel's own code (which assumes none); the max_variants=0 export refuses it.

    variants_bench.py --kiln KILN --work DIR      (needs a GPU, torch and Triton)
"""
import argparse
import os
import subprocess
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

import kiln
import kiln.export as kx

# The fp8 GEMM and bf16 RMSNorm are the ones ci/gpu-dtypes.sh checks with `kiln verify --run`.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "dtypes"))
from kernels import gemm_fp8, rmsnorm_bf16  # noqa: E402


@triton.jit
def splitk_gemm(a_ptr, b_ptr, ws_ptr, M, N, K, stride_am, stride_bk, stride_wm,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_m, pid_n, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(pid_k * BK, K, BK * SPLIT_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    ws = ws_ptr + pid_k * M * stride_wm
    tl.store(ws + rm[:, None] * stride_wm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


SPLIT_K = 4
# Tolerances by output type for offset calls (a few units in the last place of bf16; f32 sums).
TOLERANCE = {torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.float32: dict(rtol=1e-4, atol=1e-4)}
ROUNDS = 5
KERNELS = {
    "splitk_gemm": dict(
        fn=splitk_gemm,
        spec=dict(params=[kx.tensor("a", "f16", ["m", "k"], "read"), kx.tensor("b", "f16", ["k", "n"], "read"),
                          kx.tensor("ws", "f32", [str(SPLIT_K), "m", "n"], "write"),
                          kx.scalar("m"), kx.scalar("n"), kx.scalar("k")],
                  args={"M": "m", "N": "n", "K": "k", "stride_am": "k", "stride_bk": "n", "stride_wm": "n"},
                  constexprs={"BM": 128, "BN": 128, "BK": 64, "SPLIT_K": SPLIT_K},
                  options={"num_warps": 8, "num_stages": 3}, grid=["cdiv(m, 128)", "cdiv(n, 128)", str(SPLIT_K)],
                  shapes=[kx.Shape("any", ranges={"m": [1, 16384], "n": [1, 16384], "k": [1, 16384]})]),
        calls=[("aligned", (4096, 4096, 4096)), ("unaligned", (4095, 4097, 4093)), ("k aligned", (4095, 4097, 4096)),
               ("m = 1", (1, 4096, 4096)), ("a offset", (4096, 4096, 4096))]),
    "gemm_fp8": dict(
        fn=gemm_fp8,
        spec=dict(params=[kx.tensor("a", "f8e4m3", ["m", "k"], "read"), kx.tensor("b", "f8e4m3", ["k", "n"], "read"),
                          kx.tensor("c", "bf16", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"), kx.scalar("k")],
                  constexprs={"BM": 128, "BN": 128, "BK": 64}, options={"num_warps": 8, "num_stages": 3},
                  grid=["cdiv(m, 128)", "cdiv(n, 128)"],
                  shapes=[kx.Shape("any", ranges={"m": [1, 16384], "n": [1, 16384], "k": [1, 16384]})]),
        calls=[("aligned", (4096, 4096, 4096)), ("unaligned", (4095, 4097, 4093)), ("k aligned", (4095, 4097, 4096)),
               ("m = 1", (1, 4096, 4096)), ("a offset", (4096, 4096, 4096))]),
    "rmsnorm_bf16": dict(
        fn=rmsnorm_bf16,
        spec=dict(params=[kx.tensor("x", "bf16", ["m", "n"], "read"), kx.tensor("w", "bf16", ["n"], "read"),
                          kx.tensor("y", "bf16", ["m", "n"], "write"), kx.scalar("m"), kx.scalar("n"),
                          kx.scalar("eps", "f32")],
                  constexprs={"BLOCK": 4096}, options={"num_warps": 8}, grid=["m"],
                  shapes=[kx.Shape("rows", ranges={"m": [1, 1 << 20], "n": [1, 4096]})]),
        calls=[("aligned", (16384, 4096)), ("unaligned", (16384, 4095)), ("one row", (1, 4096)),
               ("x offset", (16384, 4096))]),
}


def offset_view(t):
    """`t`'s values in a tensor that starts one element into its allocation: an address that is
    not a multiple of 16, as a slice of a larger buffer gives (Triton compiles such a call without
    its alignment assumption; kiln runs the kernel's own code, which assumes none)."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view


def inputs(name, sizes, call=""):
    tensors, scalars, out_index = _inputs(name, sizes)
    if call.endswith(" offset"):
        tensors[0] = offset_view(tensors[0])
    return tensors, scalars, out_index


def _inputs(name, sizes):
    g = torch.Generator(device="cuda").manual_seed(1)
    if name == "splitk_gemm":
        m, n, k = sizes
        a = torch.randn(m, k, device="cuda", generator=g).half()
        b = torch.randn(k, n, device="cuda", generator=g).half()
        return [a, b, torch.empty(SPLIT_K, m, n, device="cuda")], [m, n, k], 2
    if name == "gemm_fp8":
        m, n, k = sizes
        a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(k, n, device="cuda", generator=g) * 0.5).to(torch.float8_e4m3fn)
        return [a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)], [m, n, k], 2
    m, n = sizes
    x = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    w = torch.randn(n, device="cuda", generator=g).bfloat16()
    return [x, w, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)], [m, n, 1e-6], 2


def triton_launch(name, spec, tensors, scalars):
    fn = KERNELS[name]["fn"]
    if name == "splitk_gemm":
        m, n, k = scalars
        grid = (triton.cdiv(m, 128), triton.cdiv(n, 128), SPLIT_K)
        return lambda: fn[grid](*tensors, m, n, k, k, n, n, **spec["constexprs"], **spec["options"])
    if name == "gemm_fp8":
        m, n, k = scalars
        grid = (triton.cdiv(m, 128), triton.cdiv(n, 128))
        return lambda: fn[grid](*tensors, m, n, k, **spec["constexprs"], **spec["options"])
    m, n, eps = scalars
    return lambda: fn[(m,)](*tensors, n, eps, **spec["constexprs"], **spec["options"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    key = os.path.join(args.work, "release")
    subprocess.run([args.kiln, "keygen", "--out", key], check=True, capture_output=True)
    rt = kiln.Runtime(trust=key + ".pub")
    rows, failed = [], False
    for name, case in KERNELS.items():
        kernels = {}
        for label, extra in (("variants", {}), ("general only", {"max_variants": 0})):
            out = os.path.join(args.work, f"{name}-{label.split()[0]}")
            kx.triton(case["fn"], out, name=name, package=name.replace("_", "-"), **case["spec"], **extra)
            archive = out + ".kiln"
            subprocess.run([args.kiln, "pack", os.path.join(out, "kiln.toml"), "--key", key + ".key", "-o", archive, "-q"],
                           check=True)
            kernels[label] = rt.open(archive).kernel(name)
            print(f"{name} ({label}): {kernels[label].reason_text}", flush=True)
        for call, sizes in case["calls"]:
            tensors, scalars, out_index = inputs(name, sizes, call)
            trit = triton_launch(name, case["spec"], tensors, scalars)
            compiled = trit()  # Triton's CompiledKernel for this call: the code its JIT picked
            want = tensors[out_index].clone()
            checks, runnable = {}, {}
            for label, k in kernels.items():
                tensors[out_index].fill_(float("nan"))
                try:
                    k(*tensors, *scalars)
                except kiln.KilnError as e:
                    # max_variants=0 compiles for aligned tensors only, and its shape says so: an
                    # offset view belongs to no shape (here, with no reference, a refusal).
                    print(f"  {name} {call} {label}: refused as expected without a reference: {e}", flush=True)
                    failed |= not call.endswith(" offset")
                    continue
                runnable[label] = k
                torch.cuda.synchronize()
                got = tensors[out_index]
                # "same": bit-identical. An offset call runs other code than Triton's build for it
                # (kiln's own code assumes no tensor aligned, Triton's only the misaligned one
                # not), whose reductions may round in another order: "close" there is within the
                # output type's tolerance, and anything else fails.
                same = "same" if torch.equal(got, want) else \
                    "close" if call.endswith(" offset") and torch.allclose(got.float(), want.float(), **TOLERANCE[got.dtype]) \
                    else "DIFF"
                explained = k.explain(*tensors, *scalars)
                variant = explained.split("variant ")[-1].split(" (")[0] if "variant " in explained else "own code"
                folder = os.path.join(args.work, f"{name}-{label.split()[0]}")
                cubin = os.path.join(folder, f"{name}.sm_90a.cubin" if variant == "own code" else
                                     f"{name}.sm_90a.{variant}.cubin")
                with open(cubin, "rb") as f:
                    same_code = f.read() == compiled.asm["cubin"]
                checks[label] = (variant, same_code, same)
                failed |= same == "DIFF"
                print(f"  {name} {call} {label}: {explained}; kiln's cubin {'is' if same_code else 'is NOT'} the one "
                      f"Triton's JIT launched", flush=True)
            # The launchers take turns, ROUNDS times, and each keeps its median: the GPU's clock
            # drifts under sustained load (a first measurement ran 10% faster than later ones of
            # the same code), so timing one launcher after the other would credit the drift to it.
            launchers = {"triton": trit, **{label: (lambda k=k: k(*tensors, *scalars)) for label, k in runnable.items()}}
            times = {label: [] for label in launchers}
            for _ in range(ROUNDS):
                for label, fn in launchers.items():
                    times[label].append(do_bench(fn, warmup=10, rep=100, return_mode="median"))
            median = {label: sorted(t)[len(t) // 2] * 1e3 for label, t in times.items()}
            for label in runnable:
                variant, same_code, same = checks[label]
                rows.append((name, call, "x".join(map(str, sizes)), label, variant, same_code, same, median["triton"],
                             median[label], median[label] / median["triton"]))
    print(f"\n{'kernel':13} {'call':10} {'sizes':16} {'export':13} {'variant':12} {'code':5} {'bits':5} "
          f"{'triton us':>10} {'kiln us':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r[0]:13} {r[1]:10} {r[2]:16} {r[3]:13} {r[4]:12} {'same' if r[5] else 'diff':5} "
              f"{r[6]:5} {r[7]:10.1f} {r[8]:9.1f} {r[9]:6.3f}")
    print("code: kiln's cubin for the call is byte-identical to the one Triton's JIT launched (same) or not (diff); "
          "bits: the outputs are bit-identical (same), within the output type's tolerance (close: offset calls only), "
          "or neither (DIFF: a failure)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
