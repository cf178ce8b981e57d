#!/usr/bin/env python3
"""Runs the packed Triton archive through kiln's Python bindings on a GPU and compares the
result with PyTorch (float64 reference) and with Triton's own launch of the same kernel.
    check_on_gpu.py ARCHIVE TRUSTED_KEY"""
import pathlib
import sys

import torch
import triton

import kiln

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import matmul_relu_triton as source  # noqa: E402

archive_path, trust = sys.argv[1], sys.argv[2]
rt = kiln.Runtime(trust)
rt.register_reference("matmul_relu", lambda a, b, c, m, n, k, info: c.copy_(torch.relu(a @ b)))
archive = rt.open(archive_path)
archive.warm(0)
kernel = archive.kernel("matmul_relu", 0)
print(f"{archive.package} {archive.revision} {archive.digest}")
print(f"route {kernel.route} ({kernel.reason}): {kernel.reason_text}")
assert kernel.route == "native", kernel.reason_text
failures = 0
for size in (256, 1024):
    a = torch.rand(size, size, device="cuda") * 2 - 1
    b = torch.rand(size, size, device="cuda") * 2 - 1
    c = torch.full((size, size), float("nan"), device="cuda")
    route = kernel(a, b, c, size, size, size)
    torch.cuda.synchronize()
    want = torch.relu(a.double() @ b.double())
    t = torch.empty_like(c)
    grid = (triton.cdiv(size, source.BLOCKS["BLOCK_M"]) * triton.cdiv(size, source.BLOCKS["BLOCK_N"]),)
    source.matmul_relu_kernel[grid](a, b, t, size, size, size, **source.BLOCKS)
    torch.cuda.synchronize()
    err_ref = (c.double() - want).abs().max().item()
    err_triton = (c - t).abs().max().item()
    unwritten = torch.isnan(c).sum().item()
    ok = unwritten == 0 and err_ref < 1e-3 and err_triton == 0.0
    failures += not ok
    print(f"{size}^3 via {route}: max |kiln - torch fp64| {err_ref:.3g}, max |kiln - triton| {err_triton:.3g}, "
          f"unwritten {unwritten} -> {'ok' if ok else 'FAIL'}")
# An undeclared shape goes to the registered PyTorch reference: m = 16385 is past the range the
# spec in matmul_relu_triton.py declares (1..16384) and past the fixed shapes of older exports.
m = 16385
a, b = torch.rand(m, 8, device="cuda"), torch.rand(8, 8, device="cuda")
c = torch.empty(m, 8, device="cuda")
route = kernel(a, b, c, m, 8, 8)
err = (c - torch.relu(a @ b)).abs().max().item()
print(f"{m}x8x8 (undeclared) via {route}: max error {err:.3g}")
failures += route != "reference" or err > 1e-4
print("stats", rt.stats())
sys.exit(1 if failures else 0)
