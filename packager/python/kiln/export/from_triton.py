"""kiln.export.triton: any @triton.jit kernel, as the user already has it, into a kiln package
folder (kiln.toml, one cubin per target, PTX and Triton's IR stages, source, metadata, test
vectors from a reference).

The call a kiln user makes (`params`) is declared with symbolic tensor shapes; the kernel's real
parameter list (`kernel_args`) is derived from what Triton compiled (triton_abi.py).

Triton specialises integer arguments on their values (a multiple of 16: `tt.divisibility`; equal
to 1: a constant). The kernel is compiled with Triton's own binder for `sample` values; each
assumption becomes a `where` condition of every range shape and is checked for fixed shapes, so
a call that breaks it goes to the reference instead of to code compiled for something else. The
specialisations Triton's JIT would pick per call are compiled ahead as variants
(triton_variants.py).

The steps, named as in from_tilelang.py: compiler, parse_target, program and compile_for
(triton_compile.py), declarations, kernel_abi (triton_abi.py), build_for, merge, code_files,
toolchain_pin, export.
"""
import inspect
import json
import pathlib

from . import manifest, toolchain, triton_variants, vectors
from .declare import Desc, Scalar, Tensor, check_call
from .errors import ExportError
from .expr import evaluate, names_in, paren
from .exported import Export, require_distinct_archs
from .triton_abi import kernel_abi, launch_config
from .triton_compile import compile_for, compiler, parse_target, program, ptx_target, ptxas_release

__all__ = ["GENERATOR", "compiler", "parse_target", "program", "compile_for", "declarations", "kernel_abi", "Build",
           "build_for", "merge", "code_files", "toolchain_pin", "Export", "export", "default_sample"]

GENERATOR = "kiln.export.triton"


def declarations(fn, params, shapes, tests, grid, args, constexprs):
    """The call as declared, checked against the kernel: (what each non-constexpr kernel parameter
    gets, the grid as three expressions of the call's integer scalars)."""
    check_call(params, shapes, tests)
    by_name = {p.name: p for p in params}
    args = _resolve_args(fn, params, args, constexprs)
    for s in shapes:
        for key, value in s.values.items():
            if not isinstance(by_name.get(key), Scalar) or not by_name[key].integer:
                raise ExportError(f"shape {s.name!r}: {key!r} is not an integer scalar of the call")
    grid = [str(g) for g in grid] + ["1"] * (3 - len(grid))
    if len(grid) != 3:
        raise ExportError(f"grid {grid}: at most three dimensions")
    integers = {p.name for p in params if isinstance(p, Scalar) and p.integer}
    for g in grid:
        if names_in(g) - integers:
            raise ExportError(f"grid {g!r} uses {sorted(names_in(g) - integers)}, which are not integer scalars of the call")
    return args, grid


def _resolve_args(fn, params, args, constexprs):
    """What each non-constexpr kernel parameter gets: `args` where given, else the call parameter
    of the same name (or, for NAME_ptr, the tensor NAME). Refuses unknown names either way."""
    by_name = {p.name: p for p in params}
    args = dict(args or {})
    kernel_names = [kp.name for kp in fn.params]
    unknown = set(args) - set(kernel_names)
    if unknown:
        raise ExportError(f"args names {sorted(unknown)}, which are not parameters of {fn.__name__} "
                          f"({', '.join(kernel_names)})")
    unknown = set(constexprs) - set(kernel_names) - {"num_warps", "num_stages", "num_ctas"}
    if unknown:
        raise ExportError(f"constexprs names {sorted(unknown)}, which are not parameters of {fn.__name__}")
    for kp in fn.params:
        if kp.is_constexpr:
            if kp.name not in constexprs and kp.default is inspect.Parameter.empty:
                raise ExportError(f"constexpr {kp.name} of {fn.__name__} has no value: give constexprs={{'{kp.name}': ...}}")
            continue
        if kp.name not in args and kp.name.endswith("_ptr") and isinstance(by_name.get(kp.name[:-4]), Tensor):
            args[kp.name] = kp.name[:-4]  # Triton's habit: x_ptr is the tensor x
        if kp.name not in args:
            if kp.name not in by_name:
                raise ExportError(f"kernel parameter {kp.name!r} of {fn.__name__} is not a call parameter: map it "
                                  f"with args={{'{kp.name}': <call parameter, expression or desc(...)>}}")
            args[kp.name] = kp.name
        a = args[kp.name]
        if isinstance(a, Desc):
            if not isinstance(by_name.get(a.tensor), Tensor):
                raise ExportError(f"{kp.name}: desc over {a.tensor!r}, which is not a tensor of the call")
        elif not isinstance(a, (str, int)):
            raise ExportError(f"{kp.name}: args value {a!r} is neither a call parameter, an expression nor a desc")
    return args


class Build:
    """One target's compile and what was derived from it."""

    def __init__(self, compiled, signature, attrs, entries, conditions, launch):
        self.compiled, self.signature, self.attrs = compiled, signature, attrs
        self.entries, self.conditions = entries, conditions
        self.block, self.shared, self.cluster, self.num_ctas = launch
        self.arch = ptx_target(compiled.asm["ptx"])


def build_for(fn, params, args, constexprs, options, sample, target, divisible=None, ones=None, unaligned=None):
    """One target's Build: compile_for (its arguments) and the kernel ABI derived from the result."""
    compiled, signature, attrs = compile_for(fn, params, args, constexprs, options, sample, target, divisible, ones,
                                             unaligned)
    entries, conditions = kernel_abi(compiled, fn, params, args, signature, attrs, ones or ())
    return Build(compiled, signature, attrs, entries, conditions, launch_config(compiled))


def merge(builds):
    """One kernel for every target: the same parameters, specialisation, block and cluster are
    required (else the targets need separate exports); shared memory and scratch take the largest
    any target asks for (more than a target needs is harmless; less would fault)."""
    first = builds[0]

    def strip(entries):
        return [{k: v for k, v in e.items() if k != "scratch"} if isinstance(e, dict) else e for e in entries]

    for b in builds[1:]:
        for what, mine, theirs in (("kernel parameters", strip(b.entries), strip(first.entries)),
                                   ("specialisation", b.conditions, first.conditions),
                                   ("block", b.block, first.block), ("cluster", b.cluster, first.cluster)):
            if mine != theirs:
                raise ExportError(f"{b.arch} and {first.arch} compile to different {what} ({mine} vs {theirs}): "
                                  f"export them as separate packages (one call per target)")
    entries = [dict(e) for e in first.entries]
    for e in entries:
        if "scratch" in e:
            sizes = [next(x for x in b.entries if x["name"] == e["name"])["scratch"] for b in builds]
            e["scratch"] = {"bytes": max(s["bytes"] for s in sizes), "align": max(s["align"] for s in sizes)}
    return entries, first.conditions, first.block, max(b.shared for b in builds), first.cluster, first.num_ctas


def _fold_variants(variant_plan, entries, block, cluster, shared):
    """Checks that each variant launches as the kernel does and takes its parameters (a constant-1
    build drops one), folds its shared memory and scratch into the kernel's (the largest wins), and
    returns (shared, {id(variant): its kernel_args} where they differ)."""
    variant_args = {}
    for v in variant_plan.variants:
        v_entries, v_conditions, v_block, v_shared, v_cluster, _ = merge(v.builds)
        strip = [{k: x for k, x in e.items() if k != "scratch"} if isinstance(e, dict) else e for e in entries]
        v_strip = [{k: x for k, x in e.items() if k != "scratch"} if isinstance(e, dict) else e for e in v_entries]
        if (v.one is None and v_strip != strip) or v_block != block or v_cluster != cluster:
            raise ExportError(f"the specialisation {v.describe()} compiles to other kernel parameters or another launch "
                              f"than the general build: export with max_variants=0")
        shared = max(shared, v_shared)
        scratch = {e["name"]: e["scratch"] for e in v_entries if isinstance(e, dict) and "scratch" in e}
        for e in entries:
            if isinstance(e, dict) and "scratch" in e and e["name"] in scratch:
                mine = scratch[e["name"]]
                e["scratch"] = {"bytes": max(e["scratch"]["bytes"], mine["bytes"]),
                                "align": max(e["scratch"]["align"], mine["align"])}
        if v_strip != strip:
            variant_args[id(v)] = v_entries
    return shared, variant_args


def _shape_table(s, grid, block, shared, cluster, conditions):
    table = {"name": s.name}
    if s.fixed:
        for c in conditions:
            if not evaluate(c, s.values):
                raise ExportError(f"fixed shape {s.name!r} breaks the compiled specialisation {c!r} (pass a sample "
                                  f"that does not assume it, or drop the shape)")
        g = [evaluate(x, s.values) for x in grid]
        if min(g) < 1:
            raise ExportError(f"fixed shape {s.name!r}: grid {grid} is {g}")
        if cluster and g[0] % cluster[0]:
            raise ExportError(f"fixed shape {s.name!r}: grid {g} is not a multiple of the cluster {cluster}")
        table.update(values=s.values, grid=g)
    else:
        where = list(s.where)
        for c in conditions:
            if names_in(c) <= set(s.values):  # decided by the shape's fixed values alone
                if not evaluate(c, s.values):
                    raise ExportError(f"shape {s.name!r} breaks the compiled specialisation {c!r}")
            elif c not in where:
                where.append(c)
        table.update(values=s.values, ranges=s.ranges, where=where,
                     grid=[int(x) if x.isdigit() else x for x in grid])
    table.update(block=block, shared_mem=shared)
    if cluster:
        table["cluster"] = cluster
    return table


def code_files(stem, builds, ptx):
    """{file: content} of every target's cubin, IR stages and Triton metadata, with the manifest's
    `code` and `ir` lists naming them."""
    files, code, ir = {}, [], []
    for b in builds:
        asm, arch = b.compiled.asm, b.arch
        files[f"{stem}.{arch}.cubin"] = asm["cubin"]
        code.append({"arch": arch, "file": f"{stem}.{arch}.cubin"})
        for stage in ("ttir", "ttgir", "llir", "ptx"):
            files[f"{stem}.{arch}.{stage}"] = asm[stage]
            ir.append(f"{stem}.{arch}.{stage}")
        if ptx:
            code.append({"arch": f"compute_{arch[3:]}", "file": f"{stem}.{arch}.ptx"})
        md = b.compiled.metadata
        meta = {k: v for k, v in md._asdict().items() if k not in ("extern_libs",)}
        meta["target"] = {"backend": md.target.backend, "arch": md.target.arch, "warp_size": md.target.warp_size}
        meta["signature"] = {k: str(v) for k, v in b.signature.items()}
        meta["specialisation"] = b.attrs
        files[f"triton-metadata.{arch}.json"] = json.dumps(meta, indent=1, default=str) + "\n"
    return files, code, ir


def toolchain_pin(triton, builds, archs, num_ctas, constexprs, sample, conditions, variant_tables, variant_plan,
                  max_variants):
    """The manifest's [toolchain] record: Triton and its ptxas, the Python stack, the GPU here, and
    what was compiled (targets, launch options, sample, specialisation, variants)."""
    first = builds[0].compiled.metadata
    ptxas, ptxas_path = ptxas_release(first.target.arch)
    pin = {"framework": "triton", "triton": triton.__version__,
           "triton_record_sha256": toolchain.distribution_digest("triton") or "not installed as a distribution"}
    pin.update(toolchain.python_stack())
    if ptxas:
        # Triton assembles with its own ptxas, not a CUDA toolkit's nvcc: recorded as ptxas (the
        # `cuda` key is compared with nvcc at pack time, which would be comparing other tools).
        bundled = ptxas_path and pathlib.Path(ptxas_path).resolve().is_relative_to(pathlib.Path(triton.__file__).resolve().parent)
        pin.update({"ptxas": f"{ptxas} (bundled with triton {triton.__version__})" if bundled else f"{ptxas} ({ptxas_path})",
                    "min_cuda_driver": ptxas})
    pin.update(toolchain.local_gpu())
    pin.update({"targets": " ".join(archs), "num_warps": str(first.num_warps), "num_stages": str(first.num_stages),
                "num_ctas": str(num_ctas), "constexprs": ", ".join(f"{k}={v}" for k, v in constexprs.items()),
                "sample": ", ".join(f"{k}={v}" for k, v in sample.items()),
                "specialisation": "; ".join(conditions) or "none",
                "variants": ", ".join(t["name"] for t in variant_tables) or "none"})
    dropped = triton_variants.dropped_note(variant_plan, max_variants)
    if dropped:
        pin["variants_dropped"] = dropped
    for b in builds:
        pin[f"triton_hash_{b.arch}"] = b.compiled.metadata.hash
        pin[f"shared_mem_{b.arch}"] = str(b.shared)
    return pin


def default_sample(params, shapes):
    """The values Triton specialises on when none are given: the first fixed shape's values where
    every shape is fixed (the kernel then fits them exactly); otherwise, for each integer scalar,
    a value no shape excludes that is neither 1 nor a multiple of 16, so that Triton assumes
    nothing and one kernel serves every call of the ranges (pass `sample` for a faster, narrower
    kernel: its assumptions become `where` conditions)."""
    integers = [p.name for p in params if isinstance(p, Scalar) and p.integer]
    if shapes and all(s.fixed for s in shapes):
        return dict(shapes[0].values)
    sample = {}
    for name in integers:
        lo, hi = 2, 2**20
        for s in shapes:
            if name in s.ranges:
                lo, hi = max(s.ranges[name][0], 2), max(min(s.ranges[name][1], 2**20), 2)
                break
            if name in s.values:
                lo = hi = s.values[name]
                break
        value = next((v for v in range(lo, hi + 1) if v % 16 and v != 1), lo)
        sample[name] = value
    return sample


def export(fn, out, *, params, grid, shapes, args=None, constexprs=None, options=None, config=None, targets=None,
           sample=None, reference=None, tests=(), reference_kind="auto", tolerance=None, name=None, package=None,
           sequence=1, description="", revision=None, sources=None, ptx=False, max_variants=15, specialize=None):
    """Compiles `fn` for each of `targets` and writes the kiln package folder `out`; returns an
    Export. README.md (packager/python) documents every argument."""
    triton = compiler()
    fn, tuned_constexprs, tuned_options = program(fn, config)
    constexprs = {**tuned_constexprs, **(constexprs or {})}
    options = {**tuned_options, **(options or {})}
    params, shapes, tests = list(params), list(shapes), list(tests)
    args, grid = declarations(fn, params, shapes, tests, grid, args, constexprs)
    integers = {p.name for p in params if isinstance(p, Scalar) and p.integer}
    given_sample = sample is not None
    sample = dict(sample) if given_sample else default_sample(params, shapes)
    missing = integers - set(sample)
    if missing:
        raise ExportError(f"sample gives no value for {sorted(missing)}")

    wanted = [parse_target(t) for t in (targets or [None])]

    def compile_all(divisible=None, ones=None, unaligned=None):
        return [build_for(fn, params, args, constexprs, options, sample, target, divisible, ones, unaligned)
                for target in wanted]

    builds = compile_all()
    archs = [b.arch for b in builds]
    require_distinct_archs(archs, targets)
    merge(builds)  # targets that differ are refused before any variant is compiled
    builds, variant_plan, pointer_checks, assume_aligned = triton_variants.plan_builds(
        fn, args, shapes, builds, compile_all, max_variants=max_variants, given_sample=given_sample,
        specialize=specialize)
    entries, conditions, block, shared, cluster, num_ctas = merge(builds)
    if assume_aligned:
        conditions = conditions + pointer_checks
    shared, variant_args = _fold_variants(variant_plan, entries, block, cluster, shared)
    if num_ctas > 1:
        grid[0] = f"{paren(grid[0])} * {num_ctas}"  # kiln's grid counts blocks, Triton's programs

    kernel_name = name or fn.__name__
    stem = kernel_name
    files, code, ir = code_files(stem, builds, ptx)
    variant_tables = triton_variants.tables(variant_plan, variant_args, pointer_checks, stem, files)
    source_names = []
    for s in sources or [inspect.getsourcefile(fn.fn)]:
        p = pathlib.Path(s)
        files[p.name] = p.read_bytes()
        source_names.append(p.name)

    shape_tables = [_shape_table(s, grid, block, shared, cluster, conditions) for s in shapes]
    tolerance = tolerance or vectors.default_tolerance(params)
    # A test must be a call the packed shape admits: its written conditions and those the compiled
    # specialisation added to every range shape.
    origin = f"added by the compiled specialisation (Triton assumed it from the sample {sample})"
    test_tables, test_files = vectors.build_tests(stem, params, shapes, tests, reference, reference_kind,
                                                  derived=[(c, origin) for c in conditions])
    files.update(test_files)

    pin = toolchain_pin(triton, builds, archs, num_ctas, constexprs, sample, conditions, variant_tables, variant_plan,
                        max_variants)
    first = builds[0].compiled.metadata
    text = manifest.render(
        package=package or kernel_name.replace("_", "-"),
        revision=revision or f"triton-{triton.__version__}-{'-'.join(archs)}-{builds[0].compiled.metadata.hash[:12]}",
        sequence=sequence, description=description, toolchain=pin,
        extra_files=[f"triton-metadata.{a}.json" for a in archs], generator=GENERATOR,
        kernel={"name": kernel_name, "entry": first.name, "backend": "cuda", "sources": source_names, "ir": ir,
                "params": [p.manifest() for p in params], "kernel_args": entries, "code": code, "variants": variant_tables,
                "tolerance": tolerance, "shapes": shape_tables, "tests": test_tables})
    files["kiln.toml"] = text
    manifest.write_files(out, files)
    return Export(out, text, {b.arch: b.compiled for b in builds})
