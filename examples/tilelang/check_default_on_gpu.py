#!/usr/bin/env python3
"""Runs exported TileLang kernels through kiln and through TileLang's own launch on the same
inputs, and compares: the outputs must be bit-identical (torch.equal) and kiln's kernel time
within 2% of TileLang's.

    check_default_on_gpu.py [--reps 50] [--warmup 10] [--tolerance 0.02] [--packages DIR ...] ARCHIVE... PUBKEY
    check_default_on_gpu.py --tilelang-only [--kernels gemm,fa,gemm-cp-async]   # TileLang's own timings

Each archive's package name says which TileLang program it came from (export_tilelang.KERNELS);
TileLang compiles that program here again, as its @tilelang.jit would, and launches it through
its own host code (TVM FFI: it encodes the tensor maps and launches at every call).

Kernel time: CUDA events around one launch, queued behind a ~0.5 ms torch.cuda._sleep so that
the GPU has not drained while the host prepares the launch: the events time the kernel itself
(plus the launch latency on the GPU), not Python's or TileLang's host overhead. TileLang's and
kiln's launches alternate; each figure is the median of --reps. A second figure, "queued", times
20 launches back to back (host overhead included where it exceeds the kernel's time).
--packages DIR...: the exported package folders; their kiln.toml's kernel_source_sha256 and
nvcc_options must match what TileLang generates here (so both runs use the same code).
Exit status 1 when a kernel is not identical, slower than TileLang by more than the tolerance, or
not launched natively. Needs PyTorch, TileLang and, except with --tilelang-only, libkiln
(KILN_LIBRARY or the loader's path) and packager/python."""
import argparse
import hashlib
import pathlib
import statistics
import sys
import tomllib

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))

SLEEP_CYCLES = 1_000_000  # ~0.5 ms at the H200's 1.98 GHz


def make_inputs(prim_func, spec, seed=0):
    """The program's tensors (random inputs; outputs filled with NaN, so an element not written
    shows) and the values of its dynamic dimensions, from spec['call']."""
    from export_tilelang import tvm_tir

    tir = tvm_tir()

    call = dict(spec.get("call", {}))
    torch.manual_seed(seed)
    tensors = []
    for p in prim_func.params:
        if p not in prim_func.buffer_map:
            raise SystemExit(f"{spec['package']}: scalar program parameters need values; not supported here")
        buf = prim_func.buffer_map[p]
        shape = []
        for extent in buf.shape:
            if isinstance(extent, tir.IntImm):
                shape.append(int(extent))
            elif isinstance(extent, tir.Var) and extent.name in call:
                shape.append(int(call[extent.name]))
            else:
                raise SystemExit(f"{spec['package']}: dimension {extent} of {buf.name} needs a value in 'call'")
        dtype = getattr(torch, str(buf.dtype))
        if buf.name in spec.get("outputs", []):
            tensors.append(torch.full(shape, float("nan"), device="cuda", dtype=dtype))
        else:
            tensors.append(torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype))
    return tensors, call


def reference(spec, tensors):
    if spec["reference"] == "matmul_relu":
        a, b, _ = tensors
        return torch.relu(a.double() @ b.double())
    if spec["reference"] == "attention":
        q, k, v, _ = tensors  # [batch, seq, heads, dim]; float32, one batch at a time (memory)
        out = []
        for b in range(q.shape[0]):
            qb, kb, vb = (t[b:b + 1].transpose(1, 2).float() for t in (q, k, v))
            o = torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, is_causal=bool(spec["args"][4]))
            out.append(o.transpose(1, 2).double())
        return torch.cat(out)
    raise SystemExit(f"unknown reference {spec['reference']}")


def against_reference(spec, tensors):
    out = tensors[-1]
    want = reference(spec, tensors)
    err = (out.double() - want).abs().max().item()
    scale = want.abs().max().item() or 1.0
    unwritten = torch.isnan(out).sum().item()
    return f"max |out - fp64 reference| {err:.3g} (max |ref| {scale:.3g}), unwritten {unwritten}", \
        unwritten == 0 and err <= 2e-2 * scale + 2e-2


def kernel_time(fns, reps, warmup):
    """Median GPU time (us) of each fn, launches alternating, each behind a sleep."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    torch.cuda.synchronize()
    events = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            fn()
            end.record()
            events[i].append((start, end))
    torch.cuda.synchronize()
    return [statistics.median(s.elapsed_time(e) * 1e3 for s, e in pairs) for pairs in events]


def queued_time(fn, rounds=5, launches=20):
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def tilelang_kernel(spec):
    import export_tilelang as ex

    module = ex.load_source(HERE / spec["source"])
    kernel, prim_func, pass_configs = ex.compile_kernel(module, spec["jit"], spec["args"], spec.get("cp_async", False))
    return kernel, prim_func, pass_configs


def source_matches(spec, kernel, pass_configs, packages):
    """Compares TileLang's code here with the exported package's, where its folder is given."""
    for folder in packages:
        manifest = tomllib.loads((pathlib.Path(folder) / "kiln.toml").read_text())
        if manifest["package"]["name"] != spec["package"]:
            continue
        tc = manifest.get("toolchain", {})
        here = hashlib.sha256(kernel.get_kernel_source().encode()).hexdigest()
        ok = tc.get("kernel_source_sha256") == here
        print(f"  {spec['package']}: kernel source here {here[:16]}, exported {tc.get('kernel_source_sha256', '?')[:16]}"
              f" -> {'same' if ok else 'DIFFERENT'}; exported nvcc options: {tc.get('nvcc_options')}")
        return ok
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="ARCHIVE... PUBKEY")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--packages", nargs="*", default=[])
    ap.add_argument("--tilelang-only", action="store_true")
    ap.add_argument("--kernels", default="gemm,fa,gemm-cp-async")
    a = ap.parse_args()
    import export_tilelang as ex
    import tilelang

    print(f"TileLang {tilelang.__version__}, PyTorch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    if a.tilelang_only:
        print(f"{'kernel':32} {'TileLang us':>12} {'queued us':>10}  check")
        failed = False
        for key in a.kernels.split(","):
            spec = ex.KERNELS[key]
            kernel, prim_func, _ = tilelang_kernel(spec)
            tensors, _ = make_inputs(prim_func, spec)
            kernel(*tensors)
            torch.cuda.synchronize()
            text, ok = against_reference(spec, tensors)
            (t,) = kernel_time([lambda: kernel(*tensors)], a.reps, a.warmup)
            q = queued_time(lambda: kernel(*tensors))
            print(f"{spec['package']:32} {t:12.2f} {q:10.2f}  {text} {'ok' if ok else 'FAIL'}")
            failed |= not ok
        return 1 if failed else 0

    if len(a.paths) < 2:
        ap.error("give ARCHIVE... PUBKEY")
    import kiln

    rt = kiln.Runtime(trust=a.paths[-1])
    by_package = {s["package"]: s for s in ex.KERNELS.values()}
    rows, failed = [], False
    for path in a.paths[:-1]:
        archive = rt.open(path)
        spec = by_package.get(archive.package)
        if spec is None:
            sys.exit(f"{path}: package {archive.package} is none of export_tilelang.KERNELS")
        kk = archive.kernel(spec["kernel"], device=0)
        print(f"{archive.package} {archive.revision} {archive.digest}: route {kk.route} ({kk.reason}) {kk.reason_text}")
        kernel, prim_func, pass_configs = tilelang_kernel(spec)
        same_source = source_matches(spec, kernel, pass_configs, a.packages)

        tl_tensors, call = make_inputs(prim_func, spec)
        kiln_tensors, _ = make_inputs(prim_func, spec)
        scalars = [call[p["name"]] for p in kk.params if not p["pointer"]]
        kernel(*tl_tensors)
        route = kk(*kiln_tensors, *scalars)
        torch.cuda.synchronize()
        inputs_same = all(torch.equal(x, y) for x, y in zip(tl_tensors[:-1], kiln_tensors[:-1]))
        identical = inputs_same and all(torch.equal(x.nan_to_num(), y.nan_to_num()) and
                                        torch.equal(torch.isnan(x), torch.isnan(y))
                                        for x, y in zip(tl_tensors, kiln_tensors))
        text, ref_ok = against_reference(spec, kiln_tensors)
        print(f"  kiln route {route}; TileLang vs kiln identical: {identical}; kiln {text}")

        t_tl, t_kiln = kernel_time([lambda: kernel(*tl_tensors), lambda: kk(*kiln_tensors, *scalars)], a.reps, a.warmup)
        q_tl, q_kiln = queued_time(lambda: kernel(*tl_tensors)), queued_time(lambda: kk(*kiln_tensors, *scalars))
        ratio = t_kiln / t_tl
        ok = identical and ref_ok and route == "native" and ratio <= 1 + a.tolerance and same_source
        failed |= not ok
        rows.append((spec["package"], t_tl, t_kiln, ratio, q_tl, q_kiln, identical, ok))

    print(f"\n{'kernel':32} {'TileLang us':>12} {'kiln us':>9} {'ratio':>7} {'queued TL us':>13} {'queued kiln us':>15}"
          f"  identical  result")
    for name, t_tl, t_kiln, ratio, q_tl, q_kiln, identical, ok in rows:
        print(f"{name:32} {t_tl:12.2f} {t_kiln:9.2f} {ratio:7.3f} {q_tl:13.2f} {q_kiln:15.2f}  {str(identical):9}  "
              f"{'ok' if ok else 'FAIL'}")
    print(f"(kernel time: median of {a.reps} single launches behind a sleep; queued: 20 launches back to back; "
          f"ratio = kiln / TileLang, at most {1 + a.tolerance:.2f})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
