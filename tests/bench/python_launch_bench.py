#!/usr/bin/env python3
"""Per-call launch overhead from Python, on a GPU: kiln's Python bindings against Triton's own
launch of the same compiled kernel (and PyTorch's matmul+relu for scale), same shape, same run,
through both of kiln's call paths: kiln._fastlaunch (the C extension, the default where it is
built) and ctypes (KILN_PYTHON_NO_EXTENSION=1). Goal: the extension's per-call time at
most 0.35 of Triton's. Prints a table last.
    python_launch_bench.py TRITON_ARCHIVE TRUSTED_KEY [ROWS_JSON]
ROWS_JSON (optional) receives the comparison row for tests/bench/report.py."""
import json
import os
import pathlib
import statistics
import sys
import time

import torch
import triton

import kiln

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "triton"))
import matmul_relu_triton as source  # noqa: E402

rt = kiln.Runtime(sys.argv[2])
archive = rt.open(sys.argv[1])
os.environ["KILN_PYTHON_NO_EXTENSION"] = "1"  # read when a kernel is resolved
kernel_ctypes = archive.kernel("matmul_relu", 0)
del os.environ["KILN_PYTHON_NO_EXTENSION"]
kernel = archive.kernel("matmul_relu", 0)
assert kernel.launcher == "extension", f"kiln._fastlaunch is not loaded: {kiln._lib.get().extension_status}"
assert kernel_ctypes.launcher == "ctypes"
assert kernel.route == "native", kernel.reason_text
size = 64  # one block: the GPU finishes each launch long before the next is issued
a, b = torch.rand(size, size, device="cuda"), torch.rand(size, size, device="cuda")
c = torch.empty(size, size, device="cuda")
grid = (1,)


def per_call_us(fn, calls=2000, reps=9):
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


results = {}
for _ in range(2):  # interleaved twice; the last measurement of each is kept
    results["triton"] = per_call_us(lambda: source.matmul_relu_kernel[grid](a, b, c, size, size, size, **source.BLOCKS))
    results["kiln"] = per_call_us(lambda: kernel(a, b, c, size, size, size))
    results["kiln_ctypes"] = per_call_us(lambda: kernel_ctypes(a, b, c, size, size, size))
    results["torch"] = per_call_us(lambda: torch.relu(a @ b))
ratio = results["kiln"] / results["triton"]
ratio_ctypes = results["kiln_ctypes"] / results["triton"]
print(f"\nPython launch overhead per call, {size}^3 matmul+relu on {torch.cuda.get_device_name()} "
      f"(triton {triton.__version__}, torch {torch.__version__})")
print(f"{'launcher':36} {'us/call':>8}")
print(f"{'Triton kernel[grid](...)':36} {results['triton']:8.2f}")
print(f"{'kiln Kernel(...) (C extension)':36} {results['kiln']:8.2f}")
print(f"{'kiln Kernel(...) (ctypes)':36} {results['kiln_ctypes']:8.2f}")
print(f"{'torch.relu(a @ b) (for scale)':36} {results['torch']:8.2f}")
print(f"kiln (C extension) / Triton = {ratio:.2f} (goal <= 0.35: {'met' if ratio <= 0.35 else 'MISSED'})")
print(f"kiln (ctypes) / Triton = {ratio_ctypes:.2f} (the fallback, no goal)")
if len(sys.argv) > 3:
    rows = [{"name": "Python launch: kiln Kernel(...) (C ext.) vs Triton", "kiln": results["kiln"],
             "baseline": results["triton"], "unit": "us", "goal": "<= 0.35", "goal_ratio": 0.35},
            {"name": "Python launch: kiln Kernel(...) (ctypes) vs Triton",
             "kiln": results["kiln_ctypes"], "baseline": results["triton"], "unit": "us", "goal": "", "goal_ratio": None}]
    pathlib.Path(sys.argv[3]).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}))
