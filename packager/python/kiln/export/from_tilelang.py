"""kiln.export.tilelang: a TileLang kernel, as the user already has it, into a kiln package folder
(kiln.toml, one cubin per target, the CUDA and host code TileLang generated, its TIR, PTX, source,
test vectors from a reference).

The kernel may be a @tilelang.jit function with the arguments that make its program (`args`),
a TileLang PrimFunc, or a JITKernel already compiled (its program is compiled again, per target,
with its own settings). Everything kiln needs is read from TileLang's IR (tilelang_ir.py): the
call (tensors, scalars, dynamic dimensions), the device kernel's own parameters (tensor maps,
pointers, scalars) and its launch (grid, block, dynamic shared memory, cluster). The cubin is the
one TileLang's own nvcc callback produced, with TileLang's flags; the PTX is compiled with the
same command and --ptx.

The steps, named as in from_triton.py: compiler, parse_target, program, compile_for,
declarations, kernel_abi, build_for, merge, code_files, toolchain_pin, export.

Cross-compilation: TileLang compiles for any CUDA arch with nvcc and no GPU
(targets=["sm_80", "sm_90a"]); its lowering differs by arch (TMA and warp specialisation on
sm_90a, plain pointers on sm_80), so such targets usually need separate exports (refused together
with the difference named). AMD targets are not exported by this version.
"""
import hashlib
import inspect
import json
import pathlib
import re

from . import manifest, toolchain, vectors
from .declare import Scalar, Shape, Tensor, check_call
from .errors import ExportError
from .exported import Export, require_distinct_archs

__all__ = ["GENERATOR", "compiler", "parse_target", "program", "compile_for", "declarations", "kernel_abi",
           "build_for", "merge", "code_files", "toolchain_pin", "Export", "export"]

GENERATOR = "kiln.export.tilelang"


def compiler():
    """The tilelang module; ExportError where TileLang is not installed."""
    try:
        import tilelang
        return tilelang
    except ImportError:
        raise ExportError("kiln.export.tilelang needs TileLang (pip install tilelang)") from None


def parse_target(arch):
    """'sm_90a' / 'sm_80' / '90a' -> TileLang's target dict. None: TileLang's auto (the GPU here)."""
    if arch is None:
        return None
    m = re.fullmatch(r"(?:sm_)?(\d+[af]?)", str(arch).strip())
    if not m:
        raise ExportError(f"target {arch!r}: kiln.export.tilelang compiles NVIDIA targets (sm_80, sm_90a, ...); "
                          "AMD targets are not supported by this exporter")
    return {"kind": "cuda", "arch": f"sm_{m.group(1)}"}


class _NvccRecorder:
    """Records what TileLang's nvcc callback compiles while TileLang compiles (inside the `with`):
    the cubin its own launch then loads, the arch and the options. (Two compiles of one source
    differ in their bytes: -lineinfo records nvcc's temporary folder; so the cubin is taken, not
    recompiled.)"""

    def __enter__(self):
        from tilelang.contrib import nvcc
        self._module, self.calls, self._original = nvcc, [], nvcc.compile_cuda

        def record(code, target_format="ptx", arch=None, options=None, **kw):
            binary = self._original(code, target_format, arch, options, **kw)
            self.calls.append(dict(code=code, format=target_format, arch=list(arch or []), options=list(options or []),
                                   binary=bytes(binary)))
            return binary

        nvcc.compile_cuda = record
        return self

    def __exit__(self, *exc):
        self._module.compile_cuda = self._original

    def cubin(self):
        if len(self.calls) != 1 or self.calls[0]["format"] != "cubin":
            raise ExportError(f"TileLang compiled {[c['format'] for c in self.calls]}, not one cubin")
        return self.calls[0]["binary"]

    def ptx(self):
        call = self.calls[0]
        return bytes(self._original(call["code"], "ptx", call["arch"], call["options"])).decode()


def program(kernel, args, pass_configs):
    """(prim_func, compile settings, source file) of what the user has."""
    compiler()
    from .tilelang_ir import _tir
    settings = {"out_idx": None, "execution_backend": "auto", "target_host": None, "compile_flags": None,
                "pass_configs": {}}
    if hasattr(kernel, "get_tir"):  # @tilelang.jit
        if args is None:
            raise ExportError(f"{getattr(kernel, '__name__', kernel)!r} is a @tilelang.jit function: pass args=(...), "
                              "the arguments that make its program")
        prim_func = kernel.get_tir(*args)
        for key in settings:
            value = getattr(kernel, key, None)
            if value is not None:
                settings[key] = value
        source = getattr(kernel, "func", None)
        source = getattr(source, "orig_func", None) or source  # TileLang 0.1.15 wraps it in a JITFunc
    elif isinstance(kernel, _tir().PrimFunc):
        prim_func, source = kernel, None
    elif hasattr(kernel, "prim_func") and hasattr(kernel, "artifact"):  # a compiled JITKernel
        prim_func, source = kernel.prim_func, None
        settings.update(out_idx=getattr(kernel, "out_idx", None), pass_configs=dict(kernel.pass_configs or {}),
                        execution_backend=getattr(kernel, "execution_backend", "auto") or "auto")
    else:
        raise ExportError(f"{kernel!r} is neither a @tilelang.jit function, a TileLang PrimFunc nor a JITKernel")
    settings["pass_configs"] = {**dict(settings["pass_configs"] or {}), **dict(pass_configs or {})}
    try:
        code = getattr(source, "__code__", None)
        source_file = code.co_filename if code is not None else inspect.getsourcefile(source) if source else None
    except TypeError:
        source_file = None
    return prim_func, settings, source_file


def compile_for(prim_func, settings, target):
    """(JITKernel, nvcc recorder) of TileLang's own compile for `target` (None: TileLang's auto),
    uncached so that the lowered modules and nvcc's run are there to read."""
    tilelang = compiler()
    tilelang.disable_cache()
    try:
        with _NvccRecorder() as nvcc:
            kernel = tilelang.compile(prim_func, out_idx=settings["out_idx"],
                                      execution_backend=settings["execution_backend"],
                                      target=target if target is not None else "auto",
                                      target_host=settings["target_host"], pass_configs=settings["pass_configs"],
                                      compile_flags=settings["compile_flags"])
    except ExportError:
        raise
    except Exception as e:
        raise ExportError(f"TileLang could not compile the program for {target or 'the GPU here'}: "
                          f"{type(e).__name__}: {e}") from e
    finally:
        tilelang.enable_cache()
    if not nvcc.calls:
        raise ExportError("TileLang compiled no CUDA code (a cached binary?)")
    return kernel, nvcc


def declarations(info, prim_func):
    """kiln.export Tensor / Scalar objects of the call, tensors shaped by the program's buffers."""
    from .tilelang_ir import to_kiln
    shapes = {}
    for p in prim_func.params:
        if p in prim_func.buffer_map:
            buf = prim_func.buffer_map[p]
            shapes[buf.name] = [str(to_kiln(d, prim_func)) for d in buf.shape]
    out = []
    for p in info["params"]:
        if p["type"] == "ptr":
            out.append(Tensor(p["name"], p["dtype"], shapes[p["name"]], p.get("access", "read_write")))
        else:
            out.append(Scalar(p["name"], p["type"]))
    return out


def kernel_abi(compiled, prim_func, ranges):
    """The device kernel's own parameters (kernel_args), the call they serve and the launch, as
    TileLang's IR says them (tilelang_ir.describe)."""
    from .tilelang_ir import describe
    return describe(compiled, prim_func, ranges)


def build_for(prim_func, settings, ranges, target):
    """One target's build (a dict): compile_for, the kernel ABI derived from the result, and the
    code TileLang compiled (its CUDA source, cubin and PTX, arch)."""
    compiled, nvcc = compile_for(prim_func, settings, target)
    info = kernel_abi(compiled, prim_func, ranges)
    cuda = compiled.get_kernel_source()
    if nvcc.calls[0]["code"] != cuda:
        raise ExportError("the CUDA source TileLang compiled is not the one it reports")
    ptx = nvcc.ptx()
    arch = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M).group(1)
    return dict(arch=arch, kernel=compiled, nvcc=nvcc, info=info, ptx=ptx, cubin=nvcc.cubin(), cuda=cuda)


def merge(builds):
    """One kernel for every target: the same entry, parameters and launch are required (else the
    targets need separate exports); dynamic shared memory takes the largest any target asks for.
    Returns the launch (the shape's grid, block, shared_mem, cluster, ranges, where)."""
    first = builds[0]
    for b in builds[1:]:
        for key in ("entry", "params", "kernel_args"):
            if b["info"][key] != first["info"][key]:
                raise ExportError(f"{b['arch']} and {first['arch']} lower to different {key} "
                                  f"({b['info'][key]} vs {first['info'][key]}): export them as separate packages")
        mine = {k: v for k, v in b["info"]["shape"].items() if k != "shared_mem"}
        theirs = {k: v for k, v in first["info"]["shape"].items() if k != "shared_mem"}
        if mine != theirs:
            raise ExportError(f"{b['arch']} and {first['arch']} launch differently ({mine} vs {theirs}): export them "
                              "as separate packages")
    shape = dict(first["info"]["shape"])
    smem = [b["info"]["shape"]["shared_mem"] for b in builds]
    if all(isinstance(s, int) for s in smem):
        shape["shared_mem"] = max(smem)  # more than a target needs is harmless; less would fault
    elif len(set(map(str, smem))) > 1:
        raise ExportError(f"the targets' dynamic shared memory differs as expressions ({smem}): export them separately")
    return shape


def _shape_table(shape, launch):
    table = {"name": shape.name}
    if shape.fixed:
        table.update(grid=launch["grid"], block=launch["block"], shared_mem=launch["shared_mem"])
    else:
        table.update(ranges=launch["ranges"], where=launch.get("where"), grid=launch["grid"], block=launch["block"],
                     shared_mem=launch["shared_mem"])
    if launch.get("cluster"):
        table["cluster"] = launch["cluster"]
    return table


def code_files(stem, builds, prim_func):
    """{file: content} of every target's cubin, CUDA and host code, TIR and PTX, with the manifest's
    `code`, `ir` and `sources` lists naming them."""
    files, code, ir, source_names = {}, [], [], []
    for b in builds:
        arch = b["arch"]
        files[f"{stem}.{arch}.cubin"] = b["cubin"]
        code.append({"arch": arch, "file": f"{stem}.{arch}.cubin"})
        files[f"{stem}.{arch}.cu"] = b["cuda"]
        files[f"{stem}.{arch}.host.cc"] = b["kernel"].get_host_source()
        files[f"{stem}.{arch}.tir"] = (f"# The TileLang program\n{prim_func.script()}\n\n# The lowered device module\n"
                                       f"{b['kernel'].artifact.device_mod.script()}\n")
        files[f"{stem}.{arch}.ptx"] = b["ptx"]
        source_names += [f"{stem}.{arch}.cu", f"{stem}.{arch}.host.cc"]
        ir += [f"{stem}.{arch}.tir", f"{stem}.{arch}.ptx"]
    return files, code, ir, source_names


def toolchain_pin(tilelang, builds, archs, kernel, args, settings):
    """The manifest's [toolchain] record: TileLang and its TVM, the Python stack, nvcc, the GPU here,
    and what was compiled (targets, nvcc options, the program and its pass configs)."""
    nvcc_call = builds[0]["nvcc"].calls[0]
    pin = {"framework": "tilelang", "tilelang": tilelang.__version__}
    # TileLang bundles its own TVM (a modified fork) and exposes no commit for either: the TVM
    # version and the digest of the installed wheel's file list pin the exact build instead.
    from tilelang import tvm
    pin["tvm"] = f"{getattr(tvm, '__version__', 'unknown')} (bundled with tilelang)"
    pin["tilelang_record_sha256"] = toolchain.distribution_digest("tilelang") or "not installed as a distribution"
    pin.update(toolchain.python_stack())
    try:
        from tilelang.contrib import nvcc as tl_nvcc
        nvcc_path = tl_nvcc.get_nvcc_compiler()
        release = toolchain.tool_release(nvcc_path)
        if release:
            pin.update({"cuda": release, "min_cuda_driver": release})
    except Exception:
        pass
    pin.update(toolchain.local_gpu())
    pin.update({
        "targets": " ".join(archs),
        # TileLang's nvcc.compile_cuda adds -O3 -lineinfo (and -ccbin, the include paths)
        "nvcc_options": " ".join(["--cubin", "-O3", "-lineinfo"] + [o for o in nvcc_call["options"] if not o.startswith("-I")]),
        "tilelang_program": f"{getattr(kernel, '__name__', type(kernel).__name__)}{tuple(args) if args is not None else ''}",
        "tilelang_pass_configs": json.dumps({str(getattr(k, "value", k)): v for k, v in settings["pass_configs"].items()},
                                            sort_keys=True, default=str),
    })
    for b in builds:
        pin[f"cubin_sha256_{b['arch']}"] = hashlib.sha256(b["cubin"]).hexdigest()
        pin[f"shared_mem_{b['arch']}"] = str(b["info"]["shape"]["shared_mem"])
    return pin


def export(kernel, out, *, args=None, targets=None, ranges=None, shape_name=None, pass_configs=None, reference=None,
           tests=(), reference_kind="auto", tolerance=None, name=None, package=None, sequence=1, description="",
           revision=None, sources=None):
    """Compiles the TileLang program for each of `targets` and writes the kiln package folder `out`.
    packager/python/README.md documents every argument."""
    tilelang = compiler()
    prim_func, settings, source_file = program(kernel, args, pass_configs)
    wanted = [parse_target(t) for t in (targets or [None])]
    builds = [build_for(prim_func, settings, ranges, target) for target in wanted]
    archs = [b["arch"] for b in builds]
    require_distinct_archs(archs, targets)
    launch = merge(builds)
    info = builds[0]["info"]
    params = declarations(info, prim_func)
    kernel_name = name or info["entry"].removesuffix("_kernel")
    stem = kernel_name
    shape = Shape(shape_name or ("any_" + "_".join(info["dynamic"]) if info["dynamic"] else "fixed"),
                  ranges=launch.get("ranges"), where=launch.get("where", ()))
    tests = list(tests)
    check_call(params, [], [])
    for t in tests:
        if t.shape != shape.name:
            raise ExportError(f"test on shape {t.shape!r}: this export declares one shape, {shape.name!r}")

    files, code, ir, source_names = code_files(stem, builds, prim_func)
    for s in sources or ([source_file] if source_file else []):
        p = pathlib.Path(s)
        files[p.name] = p.read_bytes()
        source_names.insert(0, p.name)

    table = _shape_table(shape, launch)
    tolerance = tolerance or vectors.default_tolerance(params)
    test_tables, test_files = vectors.build_tests(stem, params, [shape], tests, reference, reference_kind)
    files.update(test_files)

    pin = toolchain_pin(tilelang, builds, archs, kernel, args, settings)
    text = manifest.render(
        package=package or kernel_name.replace("_", "-"),
        revision=revision or f"tilelang-{tilelang.__version__}-{'-'.join(archs)}-{pin[f'cubin_sha256_{archs[0]}'][:12]}",
        sequence=sequence, description=description, toolchain=pin, extra_files=[], generator=GENERATOR,
        kernel={"name": kernel_name, "entry": info["entry"], "backend": "cuda", "sources": source_names, "ir": ir,
                "params": [p.manifest() for p in params], "kernel_args": info["kernel_args"], "code": code,
                "tolerance": tolerance, "shapes": [table], "tests": test_tables})
    files["kiln.toml"] = text
    manifest.write_files(out, files)
    return Export(out, text, {b["arch"]: b["kernel"] for b in builds})
