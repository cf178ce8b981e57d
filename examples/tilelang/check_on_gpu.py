#!/usr/bin/env python3
"""Runs the packed TileLang archive through kiln's Python bindings on a GPU and compares it with
PyTorch. Needs no TileLang: the archive carries everything the launch needs.
    check_on_gpu.py ARCHIVE TRUSTED_KEY"""
import sys

import torch

import kiln

rt = kiln.Runtime(sys.argv[2])
rt.register_reference("matmul_relu", lambda a, b, c, info: c.copy_(torch.relu(a @ b)))
archive = rt.open(sys.argv[1])
kernel = archive.kernel("matmul_relu", 0)
print(f"{archive.package} {archive.revision} {archive.digest}")
print(f"route {kernel.route} ({kernel.reason}): {kernel.reason_text}")
size = 1024
a = torch.randn(size, size, device="cuda", dtype=torch.float16)
b = torch.randn(size, size, device="cuda", dtype=torch.float16)
c = torch.full((size, size), float("nan"), device="cuda", dtype=torch.float16)
route = kernel(a, b, c)
torch.cuda.synchronize()
want = torch.relu(a.float() @ b.float())
err = (c.float() - want).abs().max().item()
rel = err / want.abs().max().item()
unwritten = torch.isnan(c).sum().item()
ok = route == "native" and unwritten == 0 and rel < 1e-2
print(f"{size}^3 float16 via {route}: max |kiln - torch fp32| {err:.3g} (relative to max |C| {rel:.2g}), "
      f"unwritten {unwritten} -> {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
