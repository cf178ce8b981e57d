#!/usr/bin/env python3
"""Writes a package whose index needs the tree form (FORMAT.md §3: more than 64 entry pages of
16 entries): KERNELS kernels, each with its own copy of a PTX file as its code, and EMPTY empty
files under [files] extra.
usage: make_package.py OUT_DIR PTX [KERNELS [EMPTY]]   (default 8 kernels, 1,040 empty files)"""
import pathlib
import shutil
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
out, ptx = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
kernels = int(sys.argv[3]) if len(sys.argv) > 3 else 8
empty = int(sys.argv[4]) if len(sys.argv) > 4 else 1040
for sub in ("code", "empty"):
    (out / sub).mkdir(parents=True, exist_ok=True)
names = [f"empty/e{i:04d}.bin" for i in range(empty)]
for name in names:
    (out / name).write_bytes(b"")
lines = ["[package]", 'name = "tree-index"', f'kernel_revision = "{kernels}-kernels-{empty}-files"', "sequence = 1",
         "[files]", "extra = [" + ", ".join(f'"{n}"' for n in names) + "]", ""]
for i in range(kernels):
    shutil.copyfile(ptx, out / "code" / f"k{i:03d}.ptx")
    lines += ["[[kernel]]", f'name = "k{i:03d}"', 'entry = "scale_f32"', 'backend = "cuda"',
              f'code = [{{ arch = "compute_80", file = "code/k{i:03d}.ptx" }}]', ""]
(out / "kiln.toml").write_text("\n".join(lines))
