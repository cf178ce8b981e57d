#!/usr/bin/env python3
"""Compiles the Triton matmul + ReLU for the GPU in front of it and writes a kiln package
folder: kiln.toml, the cubin, the PTX, Triton's IR stages (TTIR, TTGIR, LLIR) and the kernel's
source, with the toolchain pinned and the launch taken from Triton's own metadata.

    export_triton.py OUT_DIR [--shapes 64,256,1024]

Needs Triton, PyTorch and a CUDA GPU (Triton compiles for the device it runs on). The kernel
parameters are read from the PTX entry itself, so the scratch pointers Triton 3.x appends
(global_scratch, profile_scratch) are declared as kernel_args scratch entries: libkiln passes
them, the caller never does."""
import argparse
import inspect
import pathlib
import platform
import re
import sys

import torch
import triton

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import matmul_relu_triton as source  # noqa: E402

HIDDEN = ["global_scratch", "profile_scratch"]  # Triton 3.x's trailing pointer parameters


def ptx_params(ptx, entry):
    """The .param list of `.entry entry(...)`: [(ptx type, is pointer)]."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        sys.exit(f"export: no .entry {entry} in the PTX")
    params = []
    for line in m.group(1).split(","):
        t = re.search(r"\.param\s+\.(\w+)", line)
        if t:
            params.append((t.group(1), ".ptr" in line))
    return params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--shapes", default="64,256,1024", help="square sizes M=N=K to declare")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.shapes.split(",")]

    # Compile by running once on real tensors, as Triton users do; the handle it returns is
    # the compiled kernel with its code objects, IR stages and metadata.
    n = sizes[0]
    a = torch.rand(n, n, device="cuda")
    b = torch.rand(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    grid = (triton.cdiv(n, source.BLOCKS["BLOCK_M"]) * triton.cdiv(n, source.BLOCKS["BLOCK_N"]),)
    compiled = source.matmul_relu_kernel[grid](a, b, c, n, n, n, **source.BLOCKS)
    torch.cuda.synchronize()
    md = compiled.metadata
    name = md.name
    cluster = tuple(getattr(md, "cluster_dims", (1, 1, 1)) or (1, 1, 1))
    if cluster != (1, 1, 1):
        sys.exit(f"export: cluster dims {cluster}: this script declares no cluster; export it with kiln_triton.py "
                 "(README.md here), which gives its shapes a cluster")

    asm = compiled.asm
    ptx = asm["ptx"]
    target = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M).group(1)  # e.g. sm_90a
    files = {f"matmul_relu.{target}.cubin": asm["cubin"], f"matmul_relu.compute_{target[3:]}.ptx": ptx,
             "matmul_relu.ttir": asm["ttir"], "matmul_relu.ttgir": asm["ttgir"], "matmul_relu.llir": asm["llir"],
             "matmul_relu_triton.py": inspect.getsource(source)}
    for fname, data in files.items():
        (out / fname).write_bytes(data if isinstance(data, bytes) else data.encode())

    # Parameters: the user's six, then whatever Triton appended, all checked against the PTX.
    declared = [("a", "ptr", "f32", "read"), ("b", "ptr", "f32", "read"), ("c", "ptr", "f32", "write"),
                ("m", "i32", None, None), ("n", "i32", None, None), ("k", "i32", None, None)]
    found = ptx_params(ptx, name)
    if len(found) < len(declared) or len(found) > len(declared) + len(HIDDEN):
        sys.exit(f"export: the PTX entry has {len(found)} parameters, expected {len(declared)} (+ up to 2 scratch)")
    for (pname, kind, _, _), (ptype, _) in zip(declared, found):
        if (kind == "ptr") != (ptype == "u64"):
            sys.exit(f"export: parameter {pname} is .{ptype} in the PTX")
    # Triton's scratch pointers are the kernel's, not the caller's: libkiln provides them
    # (kernel_args scratch entries, sized from Triton's metadata; 0 bytes passes NULL).
    scratch = []
    for hidden in HIDDEN[: len(found) - 6]:
        size = int(getattr(md, f"{hidden}_size", 0) or 0)
        align = int(getattr(md, f"{hidden}_align", 1) or 1)
        scratch.append(f'  {{ name = "{hidden}", scratch = {{ bytes = {size}, align = {align} }} }},')

    threads = md.num_warps * 32
    lines = [
        "# Exported by examples/triton/export_triton.py from Triton's compiled kernel.",
        "[package]", 'name = "matmul-relu-triton"', f'kernel_revision = "triton-{triton.__version__}-{target}"',
        "sequence = 1", 'description = "C = relu(A x B), float32, compiled by Triton"', "",
        "[toolchain]", 'framework = "triton"', f'triton = "{triton.__version__}"', f'pytorch = "{torch.__version__}"',
        f'python = "{platform.python_version()}"', f'cuda = "{torch.version.cuda}"', f'min_cuda_driver = "{torch.version.cuda}"',
        f'num_warps = "{md.num_warps}"', f'num_stages = "{md.num_stages}"', f'shared_mem = "{md.shared}"',
        f'blocks = "{source.BLOCKS}"'.replace("'", ""), "",
        "[[kernel]]", 'name = "matmul_relu"', f'entry = "{name}"', 'backend = "cuda"',
        'sources = ["matmul_relu_triton.py"]',
        f'ir = ["matmul_relu.ttir", "matmul_relu.ttgir", "matmul_relu.llir", "matmul_relu.compute_{target[3:]}.ptx"]',
        "params = [",
    ]
    for pname, kind, dtype, access in declared:
        if kind == "ptr":
            lines.append(f'  {{ name = "{pname}", type = "ptr", dtype = "{dtype}", access = "{access}" }},')
        else:
            lines.append(f'  {{ name = "{pname}", type = "{kind}" }},')
    lines += ["]", "code = [",
              f'  {{ arch = "{target}", file = "matmul_relu.{target}.cubin" }},',
              f'  {{ arch = "compute_{target[3:]}", file = "matmul_relu.compute_{target[3:]}.ptx" }},',
              "]", "tolerance = { rtol = 1e-4, atol = 1e-3 }", ""]
    if scratch:
        code_at = lines.index("code = [")
        lines[code_at:code_at] = ["kernel_args = [", *[f'  "{p[0]}",' for p in declared], *scratch, "]"]
    for s in sizes:
        g = triton.cdiv(s, source.BLOCKS["BLOCK_M"]) * triton.cdiv(s, source.BLOCKS["BLOCK_N"])
        lines += ["[[kernel.shape]]", f'name = "m{s}n{s}k{s}"', f"values = {{ m = {s}, n = {s}, k = {s} }}",
                  f"grid = [{g}, 1, 1]", f"block = [{threads}, 1, 1]", f"shared_mem = {md.shared}", ""]
    (out / "kiln.toml").write_text("\n".join(lines))
    print(f"exported {name} ({target}, {md.num_warps} warps, {md.shared} B shared, "
          f"{len(declared)} params, {len(scratch)} Triton scratch pointers provided by libkiln) to {out}")


if __name__ == "__main__":
    main()
