#!/usr/bin/env python3
"""Exports a TileLang kernel as a kiln package folder: the TileLang source, the CUDA it generated
(kernel and host), its TIR, the PTX, the cubin TileLang itself loads (compiled by TileLang's own
nvcc callback, same flags), and a kiln.toml whose parameters and launch are read from TileLang's IR
(packager/python/kiln/export/tilelang_ir.py: the lowered device PrimFunc and the host PrimFunc
before host code generation; never from the generated code).

    export_tilelang.py OUT_DIR [--kernel gemm|fa|gemm-dynamic-m] [--cp-async] [--target sm_90a] [--no-run]
    export_tilelang.py OUT_DIR --source FILE.py --jit NAME --args JSON --name KERNEL --package PKG
                               [--range VAR=MIN:MAX ...] [--cp-async] [--target ...] [--no-run]

Any TileLang kernel (one device kernel per program) works: the manifest's
  params       are the call as a TileLang user makes it: the program's tensors, in order, as
               pointers with their dtypes, its scalar parameters, then one integer scalar for each
               dynamic dimension (T.dynamic / T.symbolic: TileLang reads them off the tensors' shapes,
               a kiln caller passes them);
  kernel_args  are the device kernel's real parameter list, in its order: a `tensor_map` recipe for
               each CUtensorMap parameter (a grid_constant handle in the IR; dims, strides, box,
               element strides, interleave, swizzle, L2 promotion and OOB fill exactly as the
               host IR's `__tvm_tensormap_create_tiled` call encodes them), the call's parameter
               for each plain pointer or scalar the host passes as is, and a computed scalar for
               anything else; omitted when the kernel takes exactly `params`;
  shape        grid, block, dynamic shared memory (and cluster) from the host IR's launch: a
               fixed shape, or a range shape over the dynamic dimensions with the expressions.
--cp-async adds TileLang's pass configs that disable TMA lowering and warp specialisation
(plain pointers, cp.async), as kiln needed before tensor maps.

The target defaults to TileLang's own choice for the local GPU ("auto"); --target sm_90a
compiles without a GPU (the export then skips TileLang's own run). Needs TileLang and nvcc."""
import argparse
import hashlib
import importlib.util
import json
import pathlib
import platform
import re
import sys

import tilelang
from tilelang.contrib import nvcc as tl_nvcc

HERE = pathlib.Path(__file__).resolve().parent
CP_ASYNC = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}

# The kernels this repository exports, shared with check_default_on_gpu.py.
#   package: kiln package name; kernel: kiln kernel name; source/jit/args: the TileLang program;
#   cp_async: compile with CP_ASYNC; ranges: dynamic dimensions' ranges; call: values of the
#   dynamic dimensions a check uses; outputs: the tensors the kernel writes; reference: what
#   check_default_on_gpu.py compares TileLang's own result with.
KERNELS = {
    "gemm": dict(package="matmul-relu-tilelang", kernel="matmul_relu", source="matmul_relu_tilelang.py",
                 jit="matmul_relu", args=[1024, 1024, 1024, 128, 128, 32], outputs=["C"], reference="matmul_relu",
                 description="C = relu(A x B), float16 1024^3, T.Pipelined + T.gemm, TileLang's default Hopper "
                             "lowering (TMA, warp-specialised)"),
    "gemm-cp-async": dict(package="matmul-relu-tilelang-cp-async", kernel="matmul_relu", source="matmul_relu_tilelang.py",
                          jit="matmul_relu_cp_async", args=[1024, 1024, 1024, 128, 128, 32], cp_async=True,
                          outputs=["C"], reference="matmul_relu",
                          description="C = relu(A x B), float16 1024^3, T.Pipelined + T.gemm, TileLang with TMA "
                                      "lowering and warp specialisation disabled (cp.async)"),
    "fa": dict(package="flash-attention-tilelang", kernel="flash_attention_fwd", source="flash_attention_tilelang.py",
               jit="flashattn", args=[8, 32, 4096, 128, False], outputs=["O"], reference="attention",
               description="FlashAttention forward, bshd float16, batch 8, heads 32, seq 4096, dim 128, "
                           "TileLang's default Hopper lowering (TMA, warp-specialised)"),
    "gemm-dynamic-m": dict(package="matmul-relu-tilelang-dynamic-m", kernel="matmul_relu", source="matmul_relu_tilelang.py",
                           jit="matmul_relu_dynamic_m", args=[1024, 1024, 128, 128, 32], ranges={"m": [1, 65536]},
                           call={"m": 1000}, outputs=["C"], reference="matmul_relu",
                           description="C = relu(A x B), float16, M dynamic, N = K = 1024, TMA, warp-specialised"),
}

def _load_tilelang_ir():
    """packager/python/kiln/export/tilelang_ir.py, by path: `import kiln` loads libkiln, which an
    export does not need (and a checkout may not have built)."""
    path = HERE.parents[1] / "packager" / "python" / "kiln" / "export" / "tilelang_ir.py"
    spec = importlib.util.spec_from_file_location("kiln_export_tilelang_ir", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The kernel's description (params, kernel_args, shape) is read from TileLang's IR: the lowered
# device PrimFunc and the host PrimFunc before host code generation (see that module).
tilelang_ir = _load_tilelang_ir()
ExportError = tilelang_ir.ExportError
describe = tilelang_ir.describe


def tvm_tir():
    """TVM's TIR module: `tvm.tirx` in the TVM TileLang 0.1.15 ships, `tvm.tir` before."""
    import tvm

    return getattr(tvm, "tirx", None) or __import__("tvm.tir").tir


# ---------------------------------------------------------------- compiling

def load_source(path):
    spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(pathlib.Path(path).resolve().parent))
    spec.loader.exec_module(module)
    return module


def target_arg(arch):
    return {"kind": "cuda", "arch": arch} if arch else None


def compile_kernel(module, jit_name, args, cp_async=False, target=None):
    """TileLang's own compile of the program, as its @tilelang.jit would (plus CP_ASYNC when
    asked): returns (JITKernel, prim_func, pass_configs)."""
    jit = getattr(module, jit_name)
    prim_func = jit.get_tir(*args)
    pass_configs = dict(jit.pass_configs or {})
    if cp_async:
        pass_configs.update(CP_ASYNC)
    kernel = tilelang.compile(prim_func, out_idx=jit.out_idx, execution_backend=jit.execution_backend,
                              target=target if target is not None else jit.target, target_host=jit.target_host,
                              verbose=jit.verbose, pass_configs=pass_configs, compile_flags=jit.compile_flags)
    return kernel, prim_func, pass_configs


class NvccRecorder:
    """Records what TileLang's CUDA callback asks nvcc for while TileLang compiles (inside the
    `with`): the cubin bytes its own launch then loads, the arch and the options. Afterwards,
    ptx() compiles the same source with the same command and --ptx. (Two compiles of one source
    differ in their bytes: -lineinfo records nvcc's temporary folder, and internal symbol names
    hash it; the machine code is the same. So the cubin is taken, not recompiled.)"""

    def __enter__(self):
        self.calls, self._original = [], tl_nvcc.compile_cuda

        def record(code, target_format="ptx", arch=None, options=None, **kw):
            binary = self._original(code, target_format, arch, options, **kw)
            self.calls.append(dict(code=code, format=target_format, arch=list(arch or []), options=list(options or []),
                                   binary=bytes(binary)))
            return binary

        tl_nvcc.compile_cuda = record
        return self

    def __exit__(self, *exc):
        tl_nvcc.compile_cuda = self._original

    def cubin(self):
        if len(self.calls) != 1 or self.calls[0]["format"] != "cubin":
            raise ExportError(f"TileLang compiled {[c['format'] for c in self.calls]}, not one cubin "
                              "(several code targets, or a cached binary: run with the cache disabled)")
        return self.calls[0]["binary"]

    def ptx(self):
        call = self.calls[0]
        return bytes(self._original(call["code"], "ptx", call["arch"], call["options"])).decode()


# ---------------------------------------------------------------- the manifest

def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def manifest(info, spec, files, toolchain):
    lines = ["# Exported by examples/tilelang/export_tilelang.py from TileLang's IR and generated code.",
             "[package]", f'name = "{spec["package"]}"', f'kernel_revision = "{toolchain["revision"]}"', "sequence = 1",
             f"description = {json.dumps(spec['description'])}", "", "[toolchain]"]
    lines += [f"{k} = {json.dumps(str(v))}" for k, v in toolchain.items() if k != "revision"]
    lines += ["", "[[kernel]]", f'name = "{spec["kernel"]}"', f'entry = "{info["entry"]}"', 'backend = "cuda"',
              f"sources = {toml_value(files['sources'])}", f"ir = {toml_value(files['ir'])}", "params = ["]
    lines += [f"  {toml_value(p)}," for p in info["params"]]
    lines.append("]")
    if info["kernel_args"] is not None:
        lines.append("kernel_args = [")
        lines += [f"  {toml_value(a)}," for a in info["kernel_args"]]
        lines.append("]")
    lines += ["code = ["] + [f"  {toml_value(c)}," for c in files["code"]] + ["]"]
    lines += ["tolerance = { rtol = 1e-2, atol = 5e-2 }", "", "[[kernel.shape]]"]
    shape = info["shape"]
    name = spec.get("shape_name") or ("any_" + "_".join(info["dynamic"]) if info["dynamic"] else "fixed")
    lines.append(f'name = "{name}"')
    lines += [f"{k} = {toml_value(v)}" for k, v in shape.items()]
    return "\n".join(lines) + "\n"


def export(out, spec, target=None, run=True):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source_path = pathlib.Path(spec["source"])
    if not source_path.is_absolute():
        source_path = HERE / source_path
    module = load_source(source_path)
    with NvccRecorder() as nvcc:
        kernel, prim_func, pass_configs = compile_kernel(module, spec["jit"], spec["args"], spec.get("cp_async", False),
                                                         target_arg(target))
    if kernel.artifact is None or not nvcc.calls:
        # A cache hit lacks the lowered modules and nvcc's run: compile again, uncached. (A miss
        # fills TileLang's cache, so a later TileLang run of the same program, e.g.
        # check_default_on_gpu.py --tilelang-only, need not compile.)
        tilelang.disable_cache()
        try:
            with NvccRecorder() as nvcc:
                kernel, prim_func, pass_configs = compile_kernel(module, spec["jit"], spec["args"],
                                                                 spec.get("cp_async", False), target_arg(target))
        finally:
            tilelang.enable_cache()
    info = describe(kernel, prim_func, spec.get("ranges"))
    cuda, host = kernel.get_kernel_source(), kernel.get_host_source()
    cubin, ptx = nvcc.cubin(), nvcc.ptx()
    if nvcc.calls[0]["code"] != cuda:
        raise ExportError("the CUDA source TileLang compiled is not the one it reports")
    arch = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M).group(1)
    stem = spec["kernel"]
    names = {"source": source_path.name, "cuda": f"{stem}.tilelang.cu", "host": f"{stem}.host.cc",
             "tir": f"{stem}.tir", "ptx": f"{stem}.compute_{arch[3:]}.ptx", "cubin": f"{stem}.{arch}.cubin"}
    tir = f"# The TileLang program\n{prim_func.script()}\n\n# The lowered device module\n{kernel.artifact.device_mod.script()}\n"
    contents = {"source": source_path.read_text(), "cuda": cuda, "host": host, "tir": tir, "ptx": ptx, "cubin": cubin}
    for key, data in contents.items():
        (out / names[key]).write_bytes(data if isinstance(data, bytes) else data.encode())
    files = dict(sources=[names["source"], names["cuda"], names["host"]], ir=[names["tir"], names["ptx"]],
                 code=[dict(arch=arch, file=names["cubin"]), dict(arch=f"compute_{arch[3:]}", file=names["ptx"])])
    try:
        import torch
        torch_version, cuda_version = torch.__version__, torch.version.cuda
    except ImportError:
        torch_version, cuda_version = "none", "unknown"
    lowering = "cp.async" if spec.get("cp_async") else "default (tma, warp-specialised)" if info["kernel_args"] else "default"
    toolchain = {
        "revision": f"tilelang-{tilelang.__version__}-{arch}" + ("-cp-async" if spec.get("cp_async") else ""),
        "framework": "tilelang", "tilelang": tilelang.__version__, "pytorch": torch_version,
        "python": platform.python_version(), "cuda": cuda_version, "min_cuda_driver": cuda_version,
        "nvcc_arch": " ".join(nvcc.calls[0]["arch"]),
        # TileLang's nvcc.compile_cuda adds -O3 -lineinfo (and -ccbin, the include paths)
        "nvcc_options": " ".join(["--cubin", "-O3", "-lineinfo"] +
                                 [o for o in nvcc.calls[0]["options"] if not o.startswith("-I")]),
        "tilelang_program": f"{source_path.name}:{spec['jit']}{tuple(spec['args'])}",
        "tilelang_pass_configs": json.dumps({str(getattr(k, "value", k)): v for k, v in pass_configs.items()}, sort_keys=True),
        "tilelang_lowering": lowering,
        "kernel_source_sha256": hashlib.sha256(cuda.encode()).hexdigest(),
        "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
    }
    (out / "kiln.toml").write_text(manifest(info, spec, files, toolchain))
    print(f"exported {spec['package']}: {info['entry']} ({arch}), params "
          f"{[p['name'] for p in info['params']]}, kernel args "
          f"{[a if isinstance(a, str) else a['name'] for a in (info['kernel_args'] or [])] or 'as params'}, "
          f"shape {info['shape']}, cubin sha256 {toolchain['cubin_sha256'][:16]}")
    if run:
        run_tilelang(kernel, prim_func, spec)
    return kernel, info


def run_tilelang(kernel, prim_func, spec):
    """TileLang's own launch against PyTorch, so the export is known good before kiln sees it."""
    import torch

    sys.path.insert(0, str(HERE))
    import check_default_on_gpu as check

    tensors, _ = check.make_inputs(prim_func, spec)
    kernel(*tensors)
    torch.cuda.synchronize()
    print(f"TileLang's own launch: {check.against_reference(spec, tensors)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--kernel", choices=sorted(KERNELS), default="gemm")
    ap.add_argument("--cp-async", action="store_true", help="disable TMA lowering and warp specialisation")
    ap.add_argument("--target", help="CUDA arch to compile for without a GPU, e.g. sm_90a (default: TileLang's auto)")
    ap.add_argument("--no-run", action="store_true", help="skip TileLang's own launch")
    ap.add_argument("--source")
    ap.add_argument("--jit")
    ap.add_argument("--args", help="JSON list of the jit function's arguments")
    ap.add_argument("--name", help="kiln kernel name")
    ap.add_argument("--package", help="kiln package name")
    ap.add_argument("--description", default="exported from TileLang")
    ap.add_argument("--range", action="append", default=[], help="VAR=MIN:MAX for a dynamic dimension")
    a = ap.parse_args()
    if a.source:
        if not (a.jit and a.args and a.name and a.package):
            ap.error("--source needs --jit, --args, --name and --package")
        spec = dict(package=a.package, kernel=a.name, source=str(pathlib.Path(a.source).resolve()), jit=a.jit,
                    args=json.loads(a.args), description=a.description)
    else:
        spec = dict(KERNELS[a.kernel])
        if a.cp_async and a.kernel == "gemm":
            spec = dict(KERNELS["gemm-cp-async"])
    if a.cp_async:
        spec["cp_async"] = True
    if a.range:
        spec["ranges"] = {k: [int(x) for x in v.split(":")] for k, v in (r.split("=") for r in a.range)}
    try:
        export(a.out, spec, a.target, run=not (a.no_run or a.target))
    except ExportError as e:
        sys.exit(f"export_tilelang: {e}")


if __name__ == "__main__":
    main()
