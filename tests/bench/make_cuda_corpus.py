#!/usr/bin/env python3
"""Builds a benchmark corpus of real NVIDIA code objects from the CUDA toolkit's own
libraries: each entry of each library's .nv_fatbin section becomes a single-entry fatbin
file, and a kiln.toml names them all (one kernel per code object). Usage:

    make_cuda_corpus.py OUT_DIR [--bytes N] [--group-bytes G] [--cuda /usr/local/cuda] [--lib-dir DIR]

Stops once N bytes (default 1 GiB) of code objects are written. With --group-bytes, entries
are gathered into multi-entry fatbins of about G bytes instead (few large code objects).
--lib-dir searches a folder recursively for the same libraries under versioned names (the
pip wheels' site-packages/nvidia/*/lib/libcublas.so.13, as on the GPU machine)."""
import argparse
import pathlib
import re
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
LIBRARIES = ["libcublasLt.so", "libcusparse.so", "libcusolver.so", "libcudnn_engines_precompiled.so", "libcusolverMg.so",
             "libcurand.so", "libnccl.so", "libcublas.so", "libcudnn_adv.so", "libcudnn_ops.so",
             "libcudnn_engines_runtime_compiled.so"]


def fatbin_section(lib: pathlib.Path) -> bytes:
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(lib.resolve()), out.name],
                       check=True, capture_output=True)
        return pathlib.Path(out.name).read_bytes()


def entries(section: bytes):
    """Yields (kind, sm, entry_bytes) for every entry of every fatbin container."""
    pos = 0
    while pos + 16 <= len(section):
        magic, _version, header, size = struct.unpack_from("<IHHQ", section, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned; skip padding
            continue
        off, end = pos + header, pos + header + size
        while off + 48 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", section, off)
            sm = struct.unpack_from("<I", section, off + 28)[0]
            if entry_header < 48 or off + entry_header + payload > end:
                break
            yield kind, sm, section[off:off + entry_header + payload], section[off + entry_header:off + entry_header + 16]
            off += entry_header + payload
        pos = end


def target(kind: int, sm: int, entry: bytes, payload_head: bytes) -> str:
    if kind == 1:
        return f"compute_{sm}"
    tag = f"sm_{sm}"
    if payload_head.startswith(b"\x7fELF"):
        # An uncompressed cubin records its ptxas arch (with any a/f suffix) in a note.
        m = re.search(rb"sm_(\d+)([af]?)", entry[entry.find(b"-arch"):] if b"-arch" in entry else b"")
        if m and int(m.group(1)) == sm:
            tag = "sm_" + m.group(1).decode() + m.group(2).decode()
    return tag


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--group-bytes", type=int, default=0)
    ap.add_argument("--cuda", type=pathlib.Path, default=pathlib.Path("/usr/local/cuda"))
    ap.add_argument("--lib-dir", type=pathlib.Path, action="append", default=[])
    args = ap.parse_args()
    code_dir = args.out / "code"
    code_dir.mkdir(parents=True, exist_ok=True)
    manifest = ['[package]', 'name = "cuda-corpus"', 'kernel_revision = "bench-1"', 'sequence = 1', '']
    written = count = 0
    group, group_tag = [], None

    def flush():
        nonlocal count, written, group, group_tag
        if not group:
            return
        body = b"".join(group)
        path = f"code/part.{count:05d}.fatbin"
        (args.out / path).write_bytes(struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body)
        manifest.extend(['[[kernel]]', f'name = "k{count:05d}"', 'entry = "kernel"', 'backend = "cuda"',
                         f'code = [{{ arch = "{group_tag}", file = "{path}" }}]', ''])
        written += 16 + len(body)
        count += 1
        group, group_tag = [], None

    def find(name):
        lib = args.cuda / "lib64" / name
        if lib.exists():
            return lib
        for d in args.lib_dir:
            found = sorted(p for p in d.rglob(name + "*") if p.is_file() and not p.is_symlink())
            if found:
                return found[0]
        return None

    for name in LIBRARIES:
        lib = find(name)
        if lib is None or written >= args.bytes:
            continue
        for kind, sm, entry, head in entries(fatbin_section(lib)):
            if kind not in (1, 2) or written + sum(map(len, group)) >= args.bytes:
                continue
            group.append(entry)
            group_tag = group_tag or target(kind, sm, entry, head)
            if sum(map(len, group)) >= args.group_bytes:
                flush()
    flush()
    (args.out / "kiln.toml").write_text("\n".join(manifest))
    print(f"{count} code objects, {written / 2**20:.1f} MiB in {args.out}")
    return 0 if count else 1


if __name__ == "__main__":
    sys.exit(main())
