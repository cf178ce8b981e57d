"""kiln.export.triton: any @triton.jit kernel, as the user already has it, into a kiln package
folder (kiln.toml, one cubin per target, PTX and Triton's IR stages, source, metadata, test
vectors from a reference).

The call a kiln user makes (`params`) is declared with symbolic tensor shapes; the kernel's real
parameter list (`kernel_args`) is derived from what Triton compiled, exactly as Triton's own
launcher (triton/backends/nvidia/driver.py) expands it, and checked against the PTX entry:

  * a host TensorDescriptor lowered to TMA (the compiled kernel's `tensordesc_meta` has an entry
    for it) becomes a CUtensorMap recipe, then its shape as i32 and its strides as i64, encoded
    like Triton's `fill_tma_descriptor` (element type and swizzle from the metadata, box = its
    block_size, dims and byte strides innermost first, L2 promotion 128B, OOB fill NaN for
    padding="nan" else zero);
  * a descriptor not lowered to TMA (e.g. compiled for sm_80) becomes its base pointer, shape and
    strides as i64, the padding flag as i8, then shape as i32 and strides as i64;
  * constexpr parameters vanish; `global_scratch` and `profile_scratch` follow, as kiln scratch
    entries sized from the metadata;
  * num_ctas > 1 launches clusters of num_ctas x 1 x 1 (grid x multiplied by num_ctas).

Triton specialises integer arguments on their values (a multiple of 16: `tt.divisibility`; equal
to 1: a constant). The kernel is compiled with Triton's own binder for `sample` values; each
assumption becomes a `where` condition of every range shape and is checked for fixed shapes, so
a call that breaks it goes to the reference instead of to code compiled for something else.

Cross-compilation: Triton compiles and its bundled ptxas assembles for any NVIDIA target without
a GPU (`targets=["sm_80", "sm_90a", "sm_100a"]`). AMD targets are not exported here (Triton's
HIP launcher ABI is not mapped); they are refused by name.
"""
import inspect
import json
import pathlib
import re

from . import manifest, toolchain, triton_variants, vectors
from .declare import DTYPES, INTEGER_TYPES, Desc, Scalar, Tensor, check_call
from .errors import ExportError
from .expr import evaluate, names_in, paren

GENERATOR = "kiln.export.triton"

# Triton type names -> kiln dtype of the same bits
TRITON_TO_KILN = {"fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64", "i8": "i8", "u8": "u8", "i16": "i16",
                  "u16": "u16", "i32": "i32", "u32": "u32", "i64": "i64", "u64": "u64", "i1": "i8", "u1": "u8",
                  "f32": "f32", "fp8e4nv": "f8e4m3", "fp8e5": "f8e5m2"}
# CUtensorMapDataType (host numbering, after Triton's TMA_DTYPE_DEVICE_TO_HOST) -> kiln's word
TMA_DTYPES = {0: "u8", 1: "u16", 2: "u32", 3: "i32", 4: "u64", 5: "i64", 6: "f16", 7: "f32", 8: "f64", 9: "bf16",
              10: "f32_ftz", 11: "tf32", 12: "tf32_ftz"}
SWIZZLES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}  # the 128B_ATOM_* kinds are refused


def _triton():
    try:
        import triton
        return triton
    except ImportError:
        raise ExportError("kiln.export.triton needs Triton (pip install triton)") from None


# ---------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------

# The compute capabilities NVIDIA has made GPUs of (as `kiln preflight --target` knows them): a typo
# such as sm_999 is refused here rather than reaching Triton's code generator.
CUDA_DEVICE_CCS = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121)


def _known_cc(cc, target):
    if cc not in CUDA_DEVICE_CCS:
        raise ExportError(f"target {target!r}: no NVIDIA GPU has compute capability {cc // 10}.{cc % 10} (known: "
                          f"{', '.join(f'sm_{c}' for c in CUDA_DEVICE_CCS)})")
    return cc


def parse_target(target):
    """'sm_90a' / 'sm_80' / 90 / (90, 32) -> (capability, warp size). None: the GPU here."""
    if target is None:
        return None
    if isinstance(target, int):
        return _known_cc(target, target), 32
    if isinstance(target, (tuple, list)):
        return _known_cc(int(target[0]), target), int(target[1]) if len(target) > 1 else 32
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)([af]?)", str(target).strip())
    if not m:
        raise ExportError(f"target {target!r}: kiln.export.triton compiles NVIDIA targets (sm_80, sm_90a, sm_100a, ...); "
                          "AMD targets are not supported by this exporter")
    return _known_cc(int(m.group(1)), target), 32


def _gpu_target(target):
    from triton.backends.compiler import GPUTarget
    if target is None:
        from triton.runtime import driver
        try:
            return driver.active.get_current_target()
        except Exception as e:
            raise ExportError(f"no target given and no GPU to compile for ({type(e).__name__}: {e}); pass "
                              "targets=['sm_90a', ...] to cross-compile") from None
    return GPUTarget("cuda", target[0], target[1])


# ---------------------------------------------------------------------------------------------
# Compiling as Triton's own launch would
# ---------------------------------------------------------------------------------------------

class _FakeDtype:
    """Stands for a torch dtype in the sample call. One instance per kiln dtype, kept for the
    process, and equal and hashed by name: Triton caches what a dtype maps to by the object, so
    a short-lived instance whose id() a later one reused would be taken for the earlier type."""

    _instances = {}

    def __new__(cls, kiln_dtype):
        if kiln_dtype not in cls._instances:
            self = super().__new__(cls)
            self.itemsize, self._name = DTYPES[kiln_dtype][0], DTYPES[kiln_dtype][2]
            self.is_floating_point = kiln_dtype.startswith(("f", "bf"))
            cls._instances[kiln_dtype] = self
        return cls._instances[kiln_dtype]

    def __eq__(self, other):
        return isinstance(other, _FakeDtype) and other._name == self._name

    def __hash__(self):
        return hash(("kiln-fake-dtype", self._name))

    def __str__(self):
        return f"torch.{self._name}"


class _FakeTensor:
    """Stands for a tensor in the sample call: Triton's binder reads only data_ptr and dtype. The
    address is 256-aligned, as every PyTorch allocation is (so Triton assumes 16-byte alignment:
    README.md, "What a kernel assumes")."""

    def __init__(self, t, env):
        self.dtype = _FakeDtype(t.dtype)
        self.shape = [evaluate(s, env) for s in t.shape]

    def data_ptr(self):
        return 1 << 40

    def stride(self):
        return None


def unwrap(fn, config):
    """(JITFunction, constexprs, options) from a @triton.jit function, or from a @triton.autotune
    wrapper and the config to export (an index into its configs or a triton.Config)."""
    triton = _triton()
    from triton.runtime.autotuner import Autotuner, Heuristics
    if isinstance(fn, Heuristics):
        raise ExportError("@triton.heuristics computes constexprs at each call: export the function it wraps (.fn) "
                          "with those constexprs given")
    if isinstance(fn, Autotuner):
        configs = fn.configs
        if config is None:
            if len(configs) != 1:
                raise ExportError(f"{fn.fn.__name__} is autotuned over {len(configs)} configs: pass config=INDEX or "
                                  f"config=triton.Config(...) (one of: {', '.join(str(c) for c in configs)})")
            config = 0
        if isinstance(config, int):
            if not 0 <= config < len(configs):
                raise ExportError(f"config={config}: the autotuner has {len(configs)} configs")
            config = configs[config]
        options = {k: getattr(config, k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg")
                   if getattr(config, k, None) is not None}
        return unwrap(fn.fn, None)[0], dict(config.kwargs), options
    if not isinstance(fn, triton.runtime.jit.JITFunction):
        raise ExportError(f"{fn!r} is not a @triton.jit function")
    if config is not None:
        raise ExportError("config= is for @triton.autotune kernels")
    return fn, {}, {}


def compile_for(fn, params, args, constexprs, options, sample, target, divisible=None, ones=None, unaligned=None):
    """Compiles `fn` for the call `sample` with Triton's own binder (so its specialisation is the
    one `fn[grid](...)` would pick) and returns (compiled, signature {name: type},
    specialisation attrs by parameter name). `divisible`: integer parameters to compile as
    multiples of 16 (Triton's "D" key) whatever the sample's values; `ones`: integer parameters
    to compile as the constant 1, as Triton's JIT does for a call passing 1 (variants);
    `unaligned`: pointer parameters to compile without Triton's 16-byte alignment assumption (its
    key for a tensor whose address is not a multiple of 16)."""
    triton = _triton()
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    from triton.tools.tensor_descriptor import TensorDescriptor

    gpu_target = _gpu_target(target)
    backend = make_backend(gpu_target)
    by_name = {p.name: p for p in params}
    call = {}
    for kp in fn.params:
        if kp.is_constexpr:
            continue
        a = args[kp.name]
        if isinstance(a, Desc):
            t = by_name[a.tensor]
            base = _FakeTensor(t, sample)
            call[kp.name] = TensorDescriptor(base, base.shape, [evaluate(s, sample) for s in t.strides], a.block,
                                             a.padding)
        elif isinstance(by_name.get(a), Tensor):
            call[kp.name] = _FakeTensor(by_name[a], sample)
        elif isinstance(by_name.get(a), Scalar) and not by_name[a].integer:
            call[kp.name] = 1.5  # a float scalar: its value never specialises
        else:
            call[kp.name] = evaluate(a, sample)
    kwargs = dict(constexprs)
    kwargs.update(options)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or triton.knobs.runtime.debug
    kwargs["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    try:
        bound_args, specialization, opts = binder(**call, **kwargs)
        if divisible or ones or unaligned:
            specialization = [("constexpr", 1) if kp.name in (ones or ()) else (ty, "D") if kp.name in (divisible or ())
                              else (ty, "") if kp.name in (unaligned or ())
                              else spec for kp, spec, (ty, _) in zip(fn.params, specialization, specialization)]
            if ones:
                bound_args = dict(bound_args)  # the constant's value, as Triton's binder would bind it
                for name in ones:
                    bound_args[name] = 1
        opts, signature, consts, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, opts)
        compiled = triton.compile(ASTSource(fn, signature, consts, attrs), target=gpu_target, options=opts.__dict__)
    except ExportError:
        raise
    except Exception as e:
        where = f"sm_{target[0]}" if target else "the GPU here"
        raise ExportError(f"Triton could not compile {fn.__name__} for {where}: {type(e).__name__}: {e}") from e
    attrs_by_name = {fn.arg_names[path[0]]: value for path, value in attrs.items() if len(path) == 1}
    return compiled, signature, attrs_by_name


# ---------------------------------------------------------------------------------------------
# The kernel's ABI
# ---------------------------------------------------------------------------------------------

def ptx_entry_params(ptx, entry):
    """[(bytes, align, is_pointer)] of `.entry entry(...)` in the PTX (the check that the ABI
    derived from Triton's metadata is the code's)."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise ExportError(f"no .entry {entry} in the PTX")
    out = []
    for line in m.group(1).split(","):
        line = line.strip()
        if not line:
            continue
        arr = re.search(r"\.align\s+(\d+)\s+\.b8\s+\w+\[(\d+)\]", line)
        if arr:
            out.append((int(arr.group(2)), int(arr.group(1)), False))
            continue
        t = re.search(r"\.param\s+\.[usbf](\d+)", line)
        if not t:
            raise ExportError(f"PTX parameter not understood: {line!r}")
        out.append((int(t.group(1)) // 8, int(t.group(1)) // 8, ".ptr" in line))
    return out


def _device_to_host_dtype(t):
    return {8: 10, 9: 8, 10: 9}.get(t, t)  # triton/backends/nvidia/driver.py TMA_DTYPE_DEVICE_TO_HOST


def kernel_abi(compiled, fn, params, args, signature, attrs, ones=()):
    """The kernel_args entries (dicts, in order) and the `where` conditions the compiled
    specialisation needs, checked against the PTX entry. `ones`: parameters compiled as the
    constant 1 (a variant's), which the kernel no longer takes."""
    md = compiled.metadata
    by_name = {p.name: p for p in params}
    metas = list(getattr(md, "tensordesc_meta", None) or [])
    n_descs = sum(1 for v in signature.values() if isinstance(v, str) and v.startswith("tensordesc"))
    if metas and len(metas) != n_descs:
        raise ExportError(f"{len(metas)} tensordesc_meta entries for {n_descs} descriptors")
    entries, conditions, expected = [], [], []  # expected: (bytes, what) per PTX parameter
    desc_i = 0

    def computed(name, type_, value):
        # A computed entry must not take a call parameter's name (kernel_args names are unique
        # and a pass-through entry is named by its parameter): such a kernel parameter gets "_arg".
        label = name
        while label in by_name or any(e["name"] == label for e in entries if isinstance(e, dict)):
            label += "_arg"
        entries.append({"name": label, "type": type_, "value": str(value)})
        expected.append((DTYPES[type_][0], label))

    def passed(call_name, bytes_):
        entries.append({"name": call_name})
        expected.append((bytes_, call_name))

    for kp in fn.params:
        ty = signature[kp.name]
        if ty == "constexpr":
            if not kp.is_constexpr and names_in(str(args[kp.name])) and kp.name not in ones:
                raise ExportError(f"Triton specialised {kp.name!r} to a constant for the sample call (it equals 1): "
                                  f"give a sample value other than 1, or declare it do_not_specialize")
            continue  # a constexpr, or an argument given as the constant 1 (a unit stride): folded into the code
        a = args[kp.name]
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            t = by_name[a.tensor]
            meta = metas[desc_i] if metas else None
            desc_i += 1
            rank = len(t.shape)
            m = re.match(r"tensordesc<([^[>]*)\[([^]]*)\]", ty)
            if TRITON_TO_KILN.get(m.group(1)) != t.dtype:
                raise ExportError(f"{kp.name}: Triton typed the descriptor {m.group(1)}, the tensor is {t.dtype}")
            if meta is None:  # not lowered to TMA: base pointer, shape, strides, padding, shape, strides
                passed(t.name, 8)
                for i in range(rank):
                    computed(f"{kp.name}_shape{i}_i64", "i64", t.shape[i])
                for i in range(rank):
                    computed(f"{kp.name}_stride{i}_i64", "i64", t.strides[i])
                computed(f"{kp.name}_padding_nan", "i8", 1 if a.padding == "nan" else 0)
            else:
                if meta.get("fp4_padded"):
                    raise ExportError(f"{kp.name}: fp4-padded descriptors are not supported")
                elem = TMA_DTYPES.get(_device_to_host_dtype(meta["elem_type"]))
                swizzle = SWIZZLES.get(meta["swizzle"])
                if elem is None or swizzle is None:
                    raise ExportError(f"{kp.name}: TMA element type {meta['elem_type']} / swizzle {meta['swizzle']} "
                                      f"has no kiln spelling")
                if meta["elem_size"] != DTYPES[t.dtype][0]:
                    raise ExportError(f"{kp.name}: element size {meta['elem_size']} for a {t.dtype} tensor")
                if t.strides[-1] != "1":
                    raise ExportError(f"{kp.name}: the last dimension of {t.name} must be contiguous")
                block = list(meta["block_size"])
                if len(block) != rank:
                    raise ExportError(f"{kp.name}: block {block} for a rank-{rank} tensor")
                size = meta["elem_size"]
                tmap = {"pointer": t.name, "dtype": elem, "dims": list(reversed(t.shape)),
                        "strides": [f"{paren(s)} * {size}" for s in reversed(t.strides[:-1])],
                        "box": list(reversed(block)), "swizzle": swizzle, "l2_promotion": "128B",
                        "oob_fill": "nan" if a.padding == "nan" else "zero"}
                entries.append({"name": kp.name, "tensor_map": tmap})
                expected.append((128, kp.name))
            for i in range(rank):
                computed(f"{kp.name}_shape{i}", "i32", t.shape[i])
            for i in range(rank):
                computed(f"{kp.name}_stride{i}", "i64", t.strides[i])
        elif isinstance(ty, str) and ty.startswith("*"):
            if not isinstance(by_name.get(a), Tensor):
                raise ExportError(f"kernel parameter {kp.name} is a pointer ({ty}); args must map it to a tensor of "
                                  f"the call, not {a!r}")
            t = by_name[a]
            if TRITON_TO_KILN.get(ty.lstrip("*k")) != t.dtype:
                raise ExportError(f"kernel parameter {kp.name}: Triton typed it {ty}, the tensor {t.name} is {t.dtype}")
            if any(e.get("name") == a and len(e) == 1 for e in entries):
                raise ExportError(f"kernel parameter {kp.name}: the tensor {a} is already passed to an earlier "
                                  "parameter; kiln passes each call pointer once (declare a second tensor)")
            passed(a, 8)
        elif isinstance(ty, str) and ty in TRITON_TO_KILN:
            kiln_type = TRITON_TO_KILN[ty]
            bytes_ = 1 if ty in ("i1", "u1") else DTYPES[kiln_type][0]
            p = by_name.get(a)
            if isinstance(p, Scalar) and p.type != kiln_type and p.integer and kiln_type in INTEGER_TYPES:
                # e.g. an i64 size that Triton typed i32 for the sample: passed converted, and a call
                # whose value does not fit the kernel's type is refused at launch by libkiln
                computed(kp.name, kiln_type, a)
            elif isinstance(p, Scalar):
                if p.type != kiln_type:
                    raise ExportError(f"kernel parameter {kp.name}: Triton passes {ty}, the call's {a} is {p.type}")
                if any(e.get("name") == a and len(e) == 1 for e in entries):
                    if not p.integer:
                        raise ExportError(f"kernel parameter {kp.name}: the float scalar {a} is already passed; "
                                          "kiln passes a float call parameter once")
                    computed(kp.name, kiln_type, a)  # the same scalar again, e.g. n as a stride and a size
                else:
                    passed(a, bytes_)
            elif kiln_type.startswith(("f", "bf")):
                raise ExportError(f"kernel parameter {kp.name} is {ty}: map it to a float scalar of the call "
                                  f"(kiln computes integer expressions only), not {a!r}")
            else:
                computed(kp.name, kiln_type, a)
            for attr in attrs.get(kp.name, []):
                if attr[0] == "tt.divisibility":
                    conditions.append(f"{paren(a)} % {attr[1]} == 0")
                else:
                    raise ExportError(f"{kp.name}: specialisation {attr} has no kiln condition")
        else:
            raise ExportError(f"kernel parameter {kp.name}: Triton type {ty!r} is not supported")
    for kind in ("global_scratch", "profile_scratch"):
        entries.append({"name": kind, "scratch": {"bytes": int(getattr(md, f"{kind}_size", 0) or 0),
                                                  "align": max(1, int(getattr(md, f"{kind}_align", 1) or 1))}})
        expected.append((8, kind))
    found = ptx_entry_params(compiled.asm["ptx"], md.name)
    if len(found) == len(expected) - 1 and entries[-1]["name"] == "profile_scratch":
        entries.pop(), expected.pop()  # a Triton without profile scratch
    if [f[0] for f in found] != [e[0] for e in expected]:
        raise ExportError("the PTX entry's parameters (bytes " + str([f[0] for f in found]) +
                          ") are not what Triton's launcher passes (" +
                          ", ".join(f"{w}:{n}" for w, n in expected) + ")")
    return entries, conditions


def launch_config(compiled):
    """(block, shared_mem, cluster or None, num_ctas) from Triton's metadata; refuses launch
    attributes kiln does not set."""
    md = compiled.metadata
    for key in ("launch_cooperative_grid", "launch_pdl"):
        if getattr(md, key, False):
            raise ExportError(f"the kernel needs {key}, which kiln does not set")
    num_ctas = int(getattr(md, "num_ctas", 1) or 1)
    cluster = tuple(getattr(md, "cluster_dims", None) or (num_ctas, 1, 1))
    if cluster[0] != num_ctas or cluster[1:] != (1, 1):
        raise ExportError(f"cluster_dims {cluster} with num_ctas {num_ctas}: Triton's launcher uses num_ctas x 1 x 1")
    return [md.num_warps * 32, 1, 1], int(md.shared), (list(cluster) if num_ctas > 1 else None), num_ctas


def ptx_target(ptx):
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    if not m:
        raise ExportError("the PTX has no .target directive")
    return m.group(1)


def ptxas_release(cc):
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        return get_ptxas(cc).version, get_ptxas(cc).path
    except Exception:  # older Triton: the version is not exposed
        return None, None


# ---------------------------------------------------------------------------------------------
# Several targets, one kernel
# ---------------------------------------------------------------------------------------------

class _Build:
    """One target's compile and what was derived from it."""

    def __init__(self, compiled, signature, attrs, entries, conditions, launch):
        self.compiled, self.signature, self.attrs = compiled, signature, attrs
        self.entries, self.conditions = entries, conditions
        self.block, self.shared, self.cluster, self.num_ctas = launch
        self.arch = ptx_target(compiled.asm["ptx"])


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


# ---------------------------------------------------------------------------------------------
# The export
# ---------------------------------------------------------------------------------------------

class Export:
    """What an export wrote: `path` (the package folder), `manifest` (kiln.toml's text), `archs`
    (the code objects' targets) and `compiled` (Triton's compiled kernel per arch)."""

    def __init__(self, path, text, compiled):
        self.path, self.manifest, self.compiled = pathlib.Path(path), text, compiled
        self.archs = list(compiled)

    def __repr__(self):
        return f"Export({str(self.path)!r}, archs={self.archs})"


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
    triton = _triton()
    fn, tuned_constexprs, tuned_options = unwrap(fn, config)
    constexprs = {**tuned_constexprs, **(constexprs or {})}
    options = {**tuned_options, **(options or {})}
    params, shapes, tests = list(params), list(shapes), list(tests)
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
    given_sample = sample is not None
    sample = dict(sample) if given_sample else default_sample(params, shapes)
    missing = integers - set(sample)
    if missing:
        raise ExportError(f"sample gives no value for {sorted(missing)}")

    wanted = [parse_target(t) for t in (targets or [None])]

    def compile_all(divisible=None, ones=None, unaligned=None):
        out = []
        for target in wanted:
            compiled, signature, attrs = compile_for(fn, params, args, constexprs, options, sample, target, divisible,
                                                     ones, unaligned)
            entries, conditions = kernel_abi(compiled, fn, params, args, signature, attrs, ones or ())
            out.append(_Build(compiled, signature, attrs, entries, conditions, launch_config(compiled)))
        return out

    builds = compile_all()
    archs = [b.arch for b in builds]
    if len(set(archs)) != len(archs):
        raise ExportError(f"targets {targets} compile to the same code targets {archs}")
    entries, conditions, block, shared, cluster, num_ctas = merge(builds)
    variant_plan = triton_variants.Plan([], [], [])
    # Triton compiles every tensor whose address is a multiple of 16 as aligned (its key's "D"),
    # and so does the build above: by call tensor, the kernel parameters it assumes aligned.
    aligned = {}
    for kp in _aligned_pointers(fn, builds[0]):
        aligned.setdefault(str(args[kp]), []).append(kp)
    pointer_checks = [f"addr({t}) % 16 == 0" for t in aligned]
    aligned_build, room = None, max_variants
    if max_variants and not given_sample and not all(s.fixed for s in shapes):
        if aligned:
            # The kernel's own code must serve any call, an offset view too: it is compiled as
            # Triton compiles a call with misaligned tensors, and every specialised build, which
            # assumes aligned tensors, becomes a variant whose conditions say so.
            loose = compile_all(unaligned={kp for kps in aligned.values() for kp in kps})
            if not triton_variants.same_code(loose, builds):
                aligned_build = builds
                room -= 1  # the aligned build itself is a variant, tried last
            builds = loose
            entries, conditions, block, shared, cluster, num_ctas = merge(builds)
        # Kernel parameters computed from the same call expression (N and stride_bk both `n`)
        # are divisible together: the choice is over distinct expressions.
        groups = {}
        for d in _divisibility_candidates(fn, args, builds[0], specialize):
            groups.setdefault(str(args[d]), []).append(d)
        # Divisibility is judged among builds that assume aligned tensors, as every variant does.
        baseline = aligned_build or builds
        variant_plan = triton_variants.plan(
            baseline, list(groups), lambda exprs: compile_all({d for e in exprs for d in groups[e]}), room)
        # A call passing 1 gets Triton's constant-1 build: for each expression a call can make 1,
        # with the others divisible (the common case: m = 1 on aligned n and k) and alone.
        ones = [e for e in groups if _can_be_one(e, shapes)]
        variant_plan.variants = triton_variants.plan_ones(
            baseline, ones, variant_plan,
            lambda one, exprs: compile_all({d for e in exprs for d in groups[e]}, set(groups[one])), room)
        if aligned_build is not None:
            variant_plan.variants.append(triton_variants.Variant(None, (), aligned_build))
    elif aligned:
        # One code object, compiled for aligned tensors: a call with a misaligned one does not
        # belong to the kernel's range shapes (it goes to the reference, with the reason).
        conditions = conditions + pointer_checks
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
    if num_ctas > 1:
        grid[0] = f"{paren(grid[0])} * {num_ctas}"  # kiln's grid counts blocks, Triton's programs

    kernel_name = name or fn.__name__
    stem = kernel_name
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
    variant_tables = []
    for v in variant_plan.variants:
        vname = _variant_name(v.one, v.divisible, [t["name"] for t in variant_tables])
        when = ([f"{paren(v.one)} == 1"] if v.one is not None else []) + [f"{paren(e)} % 16 == 0" for e in v.divisible]
        # Every variant was compiled for aligned tensors (Triton's key for the common call).
        when += _joined_within(pointer_checks, 16 - len(when), vname)
        vcode = []
        for b in v.builds:
            files[f"{stem}.{b.arch}.{vname}.cubin"] = b.compiled.asm["cubin"]
            vcode.append({"arch": b.arch, "file": f"{stem}.{b.arch}.{vname}.cubin"})
        table = {"name": vname, "when": when, "code": vcode}
        if id(v) in variant_args:
            table["kernel_args"] = variant_args[id(v)]
        variant_tables.append(table)
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
    dropped = []
    cap = f"max_variants={max_variants}" + (" (one of them the aligned-tensors build)" if aligned_build else "")
    if variant_plan.dropped:
        dropped.append(f"{', '.join(variant_plan.dropped)}: their divisibility changes the code too, but "
                       f"{cap} allows variants over {len(variant_plan.relevant)} expressions")
    if variant_plan.dropped_ones:
        dropped.append(f"{', '.join(e + ' == 1' for e in variant_plan.dropped_ones)}: no room left under {cap}")
    if dropped:
        pin["variants_dropped"] = "; ".join(dropped)
    for b in builds:
        pin[f"triton_hash_{b.arch}"] = b.compiled.metadata.hash
        pin[f"shared_mem_{b.arch}"] = str(b.shared)
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


def _joined_within(conditions, room, what):
    """`conditions` as at most `room` entries of a variant's `when` (16 in all): one each when they
    fit, else joined with && into as few entries as the room needs, each within 256 characters."""
    if len(conditions) <= room:
        return list(conditions)
    per = -(-len(conditions) // max(room, 1))
    joined = [" && ".join(conditions[i:i + per]) for i in range(0, len(conditions), per)]
    if room < 1 or any(len(j) > 256 for j in joined):
        raise ExportError(f"variant {what}: its {len(conditions)} tensor alignment conditions do not fit a variant's 16 "
                          f"conditions of 256 characters: export with max_variants=0")
    return joined


def _aligned_pointers(fn, build):
    """The pointer parameters (plain tensors, not descriptors) `build` compiled as 16-byte aligned:
    Triton's "D" on a pointer, which it gives a tensor whose address is a multiple of 16 unless
    the parameter is do_not_specialize_on_alignment."""
    return [kp.name for kp in fn.params
            if not kp.is_constexpr and str(build.signature.get(kp.name, "")).startswith("*")
            and any(a[0] == "tt.divisibility" for a in build.attrs.get(kp.name, []))]


def _variant_name(one, exprs, taken):
    """"d16.k.n", "one.m.d16.n.k": what a variant assumes (an expression equal to 1, expressions
    divisible by 16; "a16" alone: only its tensors aligned), in kiln's name characters."""
    def word(e):
        return re.sub(r"[^A-Za-z0-9_]", "", e) or "x"
    parts = ([f"one.{word(one)}"] if one is not None else []) + (["d16." + ".".join(word(e) for e in exprs)] if exprs else [])
    name = ".".join(parts) or "a16"
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}.{n}", n + 1
    return unique


def _can_be_one(expr, shapes):
    """True when `expr` is a call scalar some shape lets a call set to 1 (Triton then compiles it
    as a constant)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", expr):
        return False
    for s in shapes:
        if expr in s.values:
            if s.values[expr] == 1:
                return True
        elif expr in s.ranges:
            if s.ranges[expr][0] <= 1 <= s.ranges[expr][1]:
                return True
        else:
            return True
    return False


def _divisibility_candidates(fn, args, general, specialize):
    """The integer kernel parameters Triton would specialise per call on `% 16` and the general
    build does not assume: computed from the call (not constants, which every call gives alike),
    not do_not_specialize. `specialize` (names) narrows them to the user's choice."""
    names = []
    for kp in fn.params:
        ty = general.signature.get(kp.name)
        if kp.is_constexpr or not isinstance(ty, str) or ty.startswith(("*", "tensordesc")) or ty not in TRITON_TO_KILN:
            continue
        if TRITON_TO_KILN[ty] not in INTEGER_TYPES or getattr(kp, "do_not_specialize", False):
            continue
        if any(a[0] == "tt.divisibility" for a in general.attrs.get(kp.name, [])):
            continue
        if not names_in(str(args[kp.name])):
            continue
        names.append(kp.name)
    if specialize is not None:
        unknown = set(specialize) - set(names)
        if unknown:
            raise ExportError(f"specialize names {sorted(unknown)}, which are not integer kernel parameters computed "
                              f"from the call (candidates: {', '.join(names) or 'none'})")
        names = [n for n in names if n in specialize]
    return names


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
