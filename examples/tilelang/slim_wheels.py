#!/usr/bin/env python3
"""Repacks TileLang's wheels small enough to travel to the GPU machine beside a kiln build.

The four wheels TileLang 0.1.15 needs beyond what the H200 image has (tilelang 0.1.15,
apache-tvm-ffi 0.1.12, torch-c-dlpack-ext 0.1.5, z3-solver 4.15.4.0) weigh 79 MiB as PyPI serves
them, over the 64 MiB a device call carries. Two things make them large:
  - z3-solver ships libz3 three times: z3/lib/libz3.so, z3/lib/libz3.so.4.15 (byte-identical)
    and the z3 executable (data/bin/z3). Only z3/lib/libz3.so is kept: `import z3` (which
    tilelang/env.py does before loading its libraries) dlopens it, and its SONAME is
    libz3.so.4.15, so libtvm_compiler.so's NEEDED libz3.so.4.15 is already satisfied.
  - wheels are deflate zips; these are rewritten with LZMA members (zip method 14), which
    pip's installer (Python's zipfile) reads: libtvm_compiler.so goes from 23.4 to 15.2 MB.
Nothing else changes: the files kept are byte-identical, RECORD loses the dropped files' lines,
and each wheel keeps its name, so the install line of the device README works unchanged:
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
With --strip-sources, also drops from tilelang the C++ sources it was built from, which it never
reads at run time (3rdparty/tvm/src, the .cc files under src/ -- the CUDA templates and headers
there stay --, and CUTLASS's tools/): 4 MiB less.
Usage: slim_wheels.py [--strip-sources] IN_DIR OUT_DIR   (IN_DIR: the wheels from `pip download`)"""
import pathlib
import sys
import zipfile

DROP = {
    "z3_solver": lambda name: name == "z3/lib/libz3.so.4.15" or "/data/bin/" in name,
}
STRIP_SOURCES = {
    "tilelang": lambda name: name.startswith(("tilelang/3rdparty/tvm/src/", "tilelang/3rdparty/cutlass/tools/"))
    or (name.startswith("tilelang/src/") and name.endswith(".cc")),
}


def slim(src, dst, strip_sources=False):
    package = src.name.split("-")[0]
    rules = [DROP.get(package)] + ([STRIP_SOURCES.get(package)] if strip_sources else [])
    rules = [r for r in rules if r]

    def drop(name):
        return any(rule(name) for rule in rules)

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_LZMA) as zout:
        for info in zin.infolist():
            if drop(info.filename):
                continue
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(l for l in lines if not drop(l.split(",")[0])).encode()
            out = zipfile.ZipInfo(info.filename, info.date_time)
            out.external_attr = info.external_attr  # keeps the executable bits of the .so files
            out.compress_type = zipfile.ZIP_STORED if info.filename.endswith("/") else zipfile.ZIP_LZMA
            zout.writestr(out, data)


def main():
    args = sys.argv[1:]
    strip_sources = "--strip-sources" in args
    args = [a for a in args if a != "--strip-sources"]
    src, dst = pathlib.Path(args[0]), pathlib.Path(args[1])
    dst.mkdir(parents=True, exist_ok=True)
    total = 0
    for wheel in sorted(src.glob("*.whl")):
        out = dst / wheel.name
        slim(wheel, out, strip_sources)
        total += out.stat().st_size
        print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.1f} -> {out.stat().st_size / 2**20:.1f} MiB")
    print(f"total {total / 2**20:.1f} MiB in {dst}")


if __name__ == "__main__":
    main()
