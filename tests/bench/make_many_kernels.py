#!/usr/bin/env python3
"""Writes a kiln.toml of N kernels for the scale benchmarks. Every kernel has its own member for
each code object given (distinct members, as a real kernel library's archive holds), made as
hard links to the one file so that a 5,000-kernel, 4-arch, multi-gigabyte input costs no disk.
usage: make_many_kernels.py OUT_DIR N ARCH=CODE_OBJECT [ARCH=CODE_OBJECT ...]
  e.g. make_many_kernels.py out 5000 sm_80=noop.sm_80.cubin sm_90a=noop.sm_90a.cubin \
       sm_100=noop.sm_100.cubin compute_90=noop.compute_90.ptx"""
import os
import pathlib
import sys

if len(sys.argv) < 4:
    sys.exit(__doc__)
out, count = pathlib.Path(sys.argv[1]), int(sys.argv[2])
codes = [arg.split("=", 1) for arg in sys.argv[3:]]
(out / "code").mkdir(parents=True, exist_ok=True)
sources = {}
for arch, path in codes:
    suffix = pathlib.Path(path).suffix
    source = out / "code" / f"source.{arch}{suffix}"
    if source.exists():
        source.unlink()
    source.write_bytes(pathlib.Path(path).read_bytes())
    sources[arch] = (source, suffix)

lines = ['[package]', f'name = "noop-{count}"', 'kernel_revision = "bench-1"', 'sequence = 1', '']
for i in range(count):
    entries = []
    for arch, (source, suffix) in sources.items():
        member = f"code/noop.{i:05d}.{arch}{suffix}"
        target = out / member
        if target.exists():
            target.unlink()
        os.link(source, target)
        entries.append(f'{{ arch = "{arch}", file = "{member}" }}')
    lines += ['[[kernel]]', f'name = "noop_{i:05d}"', 'entry = "noop"', 'backend = "cuda"',
              'params = [{ name = "out", type = "ptr", dtype = "i32", access = "write" }, { name = "value", type = "i32" }]',
              f'code = [{", ".join(entries)}]',
              '[[kernel.shape]]', 'name = "one"', 'grid = [1]', 'block = [32]', '']
(out / "kiln.toml").write_text("\n".join(lines))
print(f"{count} kernels x {len(sources)} code objects in {out}")
