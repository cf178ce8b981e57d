#!/usr/bin/env python3
"""Runs the packed Triton TMA matmul (kiln.export of matmul_tma_triton.py) through kiln's Python bindings and
holds it against Triton's own launch of the same kernel on the same inputs:

  1. 8192^3: bit-identical (torch.equal) and kiln's speed >= 0.98x Triton's (CUDA events, 20
     warm-up, 100 timed launches each, alternating, medians);
  2. an m sweep (1 .. 8192, n = k = 8192) through the range shape `any_m`, and a few calls of
     the `general` shape: bit-identical, every one native;
  3. host launch overhead: back-to-back launches, kiln against Triton's own `kernel[grid](...)`
     with the descriptors already built, on small m (goal: kiln <= 1.02x Triton);
  4. a call outside every shape goes to the registered PyTorch reference.

    check_tma_on_gpu.py ARCHIVE TRUSTED_KEY [EXPORT_DIR]

EXPORT_DIR (the folder the exporter wrote) is optional: with it, the script also says whether
Triton compiled here exactly the kernel the archive carries (hash and cubin bytes).
Exits 1 when a check fails."""
import json
import pathlib
import statistics
import sys
import time

import torch
import triton

import kiln

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import matmul_tma_triton as source  # noqa: E402

archive_path, trust = sys.argv[1], sys.argv[2]
export_dir = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else None
BIG = 8192
failures = []
rows = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def reference(a, b_t, c, m, n, k, info):
    c.copy_((a.float() @ b_t.float().T).half())


rt = kiln.Runtime(trust)
rt.register_reference("matmul_tma", reference)
archive = rt.open(archive_path)
archive.warm(0)
kernel = archive.kernel("matmul_tma", 0)
print(f"{archive.package} {archive.revision} {archive.digest}")
print(f"device: {torch.cuda.get_device_name(0)}, triton {triton.__version__}, torch {torch.__version__}")
print(f"route {kernel.route} ({kernel.reason}): {kernel.reason_text} target {kernel.target}")
if not check(kernel.route == "native", "the kernel does not resolve natively"):
    sys.exit(1)

torch.manual_seed(0)
a_full = torch.randn(BIG, BIG, device="cuda", dtype=torch.float16)
b_t = torch.randn(BIG, BIG, device="cuda", dtype=torch.float16)


def nan_like(m, n):
    return torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)


def triton_launch(a, b_t, c):
    return source.matmul(a, b_t, c)


# ---- 1. 8192^3: identical, and as fast -----------------------------------------------------
c_kiln, c_tri = nan_like(BIG, BIG), nan_like(BIG, BIG)
route = kernel(a_full, b_t, c_kiln, BIG, BIG, BIG)
compiled = triton_launch(a_full, b_t, c_tri)
torch.cuda.synchronize()
same = torch.equal(c_kiln, c_tri)
check(route == "native", f"8192^3 went {route}")
check(same, "8192^3: kiln and Triton differ")
ref = a_full[:64].float() @ b_t.float().T  # both could be wrong alike: hold 64 rows against PyTorch too
rel = ((c_kiln[:64].float() - ref).abs().max() / ref.abs().max()).item()
check(rel < 1e-2, f"8192^3: kiln's first 64 rows are {rel:.3g} (relative) from PyTorch's fp32 product")
print(f"8192^3 via {route}: bit-identical to Triton: {same}; unwritten {torch.isnan(c_kiln).sum().item()}; "
      f"rows 0-63 against PyTorch fp32: max error {rel:.2e} of max |C|")
if export_dir is not None:
    meta = json.loads(next(export_dir.glob("triton-metadata.*.json")).read_text())
    cubins = list(export_dir.glob("*.cubin"))
    same_cubin = len(cubins) == 1 and cubins[0].read_bytes() == compiled.asm["cubin"]
    print(f"Triton here compiled hash {compiled.metadata.hash[:16]}, the archive's {meta['hash'][:16]}: "
          f"{'the same kernel' if meta['hash'] == compiled.metadata.hash else 'DIFFERENT'}; cubin bytes "
          f"{'identical' if same_cubin else 'differ'}")

descs = source.descriptors(a_full, b_t, c_tri)
grid = source.grid(BIG, BIG)


def tri_big():
    source.matmul_tma_kernel[grid](*descs, BIG, BIG, BIG, **source.BLOCKS, **source.OPTIONS)


def kiln_big():
    kernel(a_full, b_t, c_kiln, BIG, BIG, BIG)


for _ in range(20):
    kiln_big()
    tri_big()
torch.cuda.synchronize()
times = {"kiln": [], "triton": []}
events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(200)]
for i in range(100):
    for j, (name, fn) in enumerate((("kiln", kiln_big), ("triton", tri_big))):
        start, end = events[2 * i + j]
        start.record()
        fn()
        end.record()
torch.cuda.synchronize()
for i in range(100):
    for j, name in enumerate(("kiln", "triton")):
        start, end = events[2 * i + j]
        times[name].append(start.elapsed_time(end))
t_kiln, t_tri = statistics.median(times["kiln"]), statistics.median(times["triton"])
speed = t_tri / t_kiln
tflops = 2 * BIG ** 3 / (t_kiln * 1e-3) / 1e12
check(speed >= 0.98, f"8192^3: kiln runs at {speed:.3f}x Triton's speed")
print(f"8192^3 median: kiln {t_kiln:.3f} ms ({tflops:.0f} TFLOP/s), Triton {t_tri:.3f} ms: speed {speed:.3f}x")
rows.append(("8192^3 bit-identical", "yes" if same else "NO"))
rows.append(("8192^3 kiln / Triton time", f"{t_kiln:.3f} / {t_tri:.3f} ms, speed {speed:.3f}x (goal >= 0.98)"))
del c_tri

# ---- 2. the m sweep through the range shape, and the general shape ----------------------------
sweep = [1, 7, 64, 100, 128, 256, 1000, 1024, 4096, 8191, 8192]
identical = native = 0
for m in sweep:
    a = a_full[:m]
    ck, ct = nan_like(m, BIG), nan_like(m, BIG)
    route = kernel(a, b_t, ck, m, BIG, BIG)
    triton_launch(a, b_t, ct)
    torch.cuda.synchronize()
    ok = torch.equal(ck, ct)
    identical += ok
    native += route == "native"
    check(ok and route == "native", f"m={m}: route {route}, identical {ok}")
    print(f"  m={m:5d} n=k={BIG}: {route:9s} identical {ok}")
rows.append((f"m sweep (n=k={BIG})", f"{identical}/{len(sweep)} identical, {native}/{len(sweep)} native"))
general = [(1, 16, 16), (100, 272, 80), (300, 992, 4096), (129, 272, 64)]
g_ok = 0
for m, n, k in general:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    bt = torch.randn(n, k, device="cuda", dtype=torch.float16)
    ck, ct = nan_like(m, n), nan_like(m, n)
    route = kernel(a, bt, ck, m, n, k)
    triton_launch(a, bt, ct)
    torch.cuda.synchronize()
    ok = torch.equal(ck, ct) and route == "native"
    g_ok += ok
    check(ok, f"general m={m} n={n} k={k}: route {route}, identical {torch.equal(ck, ct)}")
    print(f"  m={m} n={n} k={k}: {route} identical {torch.equal(ck, ct)}")
rows.append(("general shape calls", f"{g_ok}/{len(general)} identical and native"))

# ---- 3. host launch overhead --------------------------------------------------------------------


def host_us(fn, calls=100, reps=21):
    """Median over reps of the host time per call for `calls` back-to-back launches."""
    fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per)


for m, n, k in ((1, BIG, BIG), (64, BIG, BIG), (1, 256, 64)):
    a = a_full[:m, :k].contiguous()
    bt = b_t[:n, :k].contiguous()
    c = nan_like(m, n)
    d = source.descriptors(a, bt, c)
    g = source.grid(m, n)
    us_tri = [host_us(lambda: source.matmul_tma_kernel[g](*d, m, n, k, **source.BLOCKS, **source.OPTIONS))]
    us_kiln = [host_us(lambda: kernel(a, bt, c, m, n, k))]
    # Twice, alternating, to take drift out.
    us_tri.append(host_us(lambda: source.matmul_tma_kernel[g](*d, m, n, k, **source.BLOCKS, **source.OPTIONS)))
    us_kiln.append(host_us(lambda: kernel(a, bt, c, m, n, k)))
    tk, tt = min(us_kiln), min(us_tri)
    ratio = tk / tt
    check(ratio <= 1.02, f"launch overhead m={m} n={n} k={k}: kiln {tk:.2f} us is {ratio:.3f}x Triton's {tt:.2f} us")
    print(f"launch m={m} n={n} k={k}: kiln {tk:.2f} us/call, Triton {tt:.2f} us/call: {ratio:.3f}x")
    rows.append((f"launch m={m} n={n} k={k}", f"kiln {tk:.2f} us, Triton {tt:.2f} us: {ratio:.3f}x (goal <= 1.02)"))

# ---- 4. outside every shape: the reference -------------------------------------------------------
m, n, k = 64, 8200, 64  # n % 16 != 0: not the compiled specialisation
a = torch.randn(m, k, device="cuda", dtype=torch.float16)
bt = torch.randn(n, k, device="cuda", dtype=torch.float16)
c = nan_like(m, n)
route = kernel(a, bt, c, m, n, k)
err = (c.float() - a.float() @ bt.float().T).abs().max().item()
check(route == "reference" and err < 0.1, f"n=8200: route {route}, error {err}")
rows.append(("n=8200 (outside every shape)", f"{route}, max error {err:.3g}"))

print("stats", rt.stats())
print()
print("Triton TMA matmul through kiln")
for what, result in rows:
    print(f"  {what:32s} {result}")
print("PASS" if not failures else "FAIL: " + "; ".join(failures))
sys.exit(1 if failures else 0)
