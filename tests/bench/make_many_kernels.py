#!/usr/bin/env python3
"""Writes a kiln.toml of N kernels, each with its own copy of one cubin (distinct members, as
an archive built by a real kernel library would hold), for the open-and-load-one benchmark.
usage: make_many_kernels.py CUBIN OUT_DIR N"""
import pathlib
import shutil
import sys

cubin, out, count = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
(out / "code").mkdir(parents=True, exist_ok=True)
lines = ['[package]', f'name = "noop-{count}"', 'kernel_revision = "bench-1"', 'sequence = 1', '']
data = cubin.read_bytes()
for i in range(count):
    path = f"code/noop.{i:05d}.sm_90a.cubin"
    (out / path).write_bytes(data)
    lines += ['[[kernel]]', f'name = "noop_{i:05d}"', 'entry = "noop"', 'backend = "cuda"',
              'params = [{ name = "out", type = "ptr", dtype = "i32", access = "write" }, { name = "value", type = "i32" }]',
              f'code = [{{ arch = "sm_90a", file = "{path}" }}]',
              '[[kernel.shape]]', 'name = "one"', 'grid = [1]', 'block = [32]', '']
(out / "kiln.toml").write_text("\n".join(lines))
print(f"{count} kernels in {out}")
