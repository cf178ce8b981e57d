#!/usr/bin/env python3
"""Compiles the seed's TileLang matmul + ReLU and writes a kiln package folder: the TileLang
source, the CUDA it generated (kernel and host), its TIR, the PTX and a cubin compiled from
that CUDA with TileLang's own nvcc flags, and a kiln.toml with the toolchain pinned and the
launch taken from TileLang's host code.
    export_tilelang.py OUT_DIR
Needs TileLang, PyTorch, nvcc and a CUDA GPU."""
import inspect
import pathlib
import platform
import re
import sys

import tilelang
import torch
from tilelang.contrib import nvcc as tl_nvcc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import matmul_relu_tilelang as source  # noqa: E402


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    s, t = source.SIZES, source.TILES
    kernel = source.matmul_relu(s["M"], s["N"], s["K"], t["block_M"], t["block_N"], t["block_K"])
    cuda = kernel.get_kernel_source()
    host = kernel.get_host_source() if hasattr(kernel, "get_host_source") else ""
    entry = re.search(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(", cuda).group(1)
    with kernel.target:
        options = tl_nvcc.default_compile_options(getattr(kernel, "compile_flags", None))
        arch, _ = tl_nvcc.get_target_arch_and_code(kernel.target)
        cubin = tl_nvcc.compile_cuda(cuda, target_format="cubin", options=options)
        ptx = tl_nvcc.get_ptx_from_source(cuda, compile_flags=getattr(kernel, "compile_flags", None))
    target = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M).group(1)

    # The launch: TileLang's host code (TVM FFI) packs, after the pointer arguments, the grid
    # dimensions it uses (blockIdx.x[, y[, z]]), then threadIdx x, y, z, then the dynamic shared
    # memory, in consecutive stack slots just before it looks the kernel up by name.
    before = host[: host.find(f'"{entry}"')] if f'"{entry}"' in host else ""
    slots = [(int(i), int(v)) for i, v in re.findall(r"\[(\d+)\]\.v_int64\) = \(\(int64_t\)(\d+)\)", before)]
    run = []
    for index, value in reversed(slots):  # the last run of consecutive slots
        if run and index != run[0][0] - 1:
            break
        run.insert(0, (index, value))
    values = [v for _, v in run]
    if not 5 <= len(values) <= 7:
        sys.exit(f"export: unexpected launch values {values} in TileLang's host code")
    smem, block = values[-1], values[-4:-1]
    grid = (values[:-4] + [1, 1])[:3]
    tir = str(kernel.prim_func) if hasattr(kernel, "prim_func") else str(getattr(kernel, "artifact", ""))

    files = {"matmul_relu_tilelang.py": inspect.getsource(source), "matmul_relu.tilelang.cu": cuda,
             "matmul_relu.host.cc": host, "matmul_relu.tir": tir, f"matmul_relu.compute_{target[3:]}.ptx": ptx,
             f"matmul_relu.{target}.cubin": cubin}
    for name, data in files.items():
        (out / name).write_bytes(bytes(data) if isinstance(data, (bytes, bytearray)) else data.encode())
    params = re.search(entry + r"\s*\((.*?)\)", cuda, re.S).group(1)
    names = re.findall(r"(\w+)\s*(?:,|$)", params.strip())
    lines = [
        "# Exported by examples/tilelang/export_tilelang.py from TileLang's generated CUDA.",
        "[package]", 'name = "matmul-relu-tilelang"', f'kernel_revision = "tilelang-{tilelang.__version__}-{target}"',
        "sequence = 1", 'description = "C = relu(A x B), float16, T.Pipelined + T.gemm, compiled by TileLang"', "",
        "[toolchain]", 'framework = "tilelang"', f'tilelang = "{tilelang.__version__}"', f'pytorch = "{torch.__version__}"',
        f'python = "{platform.python_version()}"', f'cuda = "{torch.version.cuda}"', f'min_cuda_driver = "{torch.version.cuda}"',
        f'nvcc_arch = "{arch}"', f'nvcc_options = "{" ".join(o for o in options if not o.startswith("-I"))}"',
        f'tiles = "{t}"'.replace("'", ""), "",
        "[[kernel]]", 'name = "matmul_relu"', f'entry = "{entry}"', 'backend = "cuda"',
        'sources = ["matmul_relu_tilelang.py", "matmul_relu.tilelang.cu", "matmul_relu.host.cc"]',
        f'ir = ["matmul_relu.tir", "matmul_relu.compute_{target[3:]}.ptx"]',
        "params = [",
        *[f'  {{ name = "{n}", type = "ptr", dtype = "f16", access = "{"write" if n == names[-1] else "read"}" }},'
          for n in names],
        "]", "code = [",
        f'  {{ arch = "{target}", file = "matmul_relu.{target}.cubin" }},',
        f'  {{ arch = "compute_{target[3:]}", file = "matmul_relu.compute_{target[3:]}.ptx" }},',
        "]", "tolerance = { rtol = 1e-2, atol = 5e-2 }", "",
        "[[kernel.shape]]", f'name = "m{s["M"]}n{s["N"]}k{s["K"]}"',
        f"grid = {grid}", f"block = {block}", f"shared_mem = {smem}", "",
    ]
    (out / "kiln.toml").write_text("\n".join(lines))
    print(f"exported {entry} ({target}) params {names}, grid {grid} block {block} smem {smem}")
    if any("desc" in n for n in names) or "CUtensorMap" in cuda:
        sys.exit("export: the kernel takes CUtensorMap descriptors (TMA); kiln cannot pass those yet")
    # Check TileLang's own run against PyTorch, so the export is known good before kiln sees it.
    a = torch.randn(s["M"], s["K"], device="cuda", dtype=torch.float16)
    b = torch.randn(s["K"], s["N"], device="cuda", dtype=torch.float16)
    c = torch.empty(s["M"], s["N"], device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    err = (c.float() - torch.relu(a.float() @ b.float())).abs().max().item()
    print(f"TileLang's own launch: max |C - torch| = {err:.3g}")


if __name__ == "__main__":
    main()
