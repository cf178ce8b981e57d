"""Exports a Triton kernel as a kiln package folder (kiln.toml, code objects, IR, source).

The call a kiln user makes (`params`) is declared here with symbolic tensor shapes; the kernel's
real parameter list (`kernel_args`) is derived from what Triton compiled, exactly as Triton's
own launcher (triton/backends/nvidia/driver.py) expands it:

  * a host `TensorDescriptor` lowered to TMA (the compiler's `tensordesc_meta` has an entry for
    it) becomes a 128-byte CUtensorMap, then its shape as i32 and its strides as i64; the map is
    encoded like Triton's `fill_tma_descriptor`: the element type and swizzle from the metadata,
    box = the metadata's block_size (which may be smaller than the descriptor's block shape:
    Triton splits a store), dims and byte strides innermost first, element strides 1, no
    interleave, L2 promotion 128B, OOB fill NaN for padding="nan" else zero;
  * a descriptor not lowered to TMA (no metadata, e.g. sm_80) becomes its base pointer, shape
    and strides as i64, the padding flag as an 8-bit integer, then shape as i32 and strides as i64;
  * constexpr parameters vanish; `global_scratch` and `profile_scratch` pointers follow the
    others, as kiln scratch entries with the metadata's size per program and alignment;
  * num_ctas > 1 launches clusters of num_ctas x 1 x 1 (grid x is multiplied by num_ctas).

Triton specialises integer arguments on their values (a multiple of 16: `tt.divisibility`; equal
to 1: a constexpr); the kernel is compiled for `sample` values with Triton's own binder, and each
assumption becomes a `where` condition of every range shape (and is checked for fixed shapes),
so a call that breaks it goes to the reference instead of a kernel compiled for something else.

Everything derived is checked against the PTX entry's parameter list (count and sizes), so a
Triton whose ABI differs is refused at export rather than at launch.

Runs without a GPU when given a target (`target=(90, 32)`): Triton compiles and ptxas assembles
without a device; with none, the target is the active GPU's, as Triton's own launch uses.
"""
import ast
import inspect
import json
import pathlib
import platform
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import create_function_from_signature
from triton.tools.tensor_descriptor import TensorDescriptor

KILN_DTYPES = {  # kiln dtype -> (element size, torch dtype name, Triton type, NumPy dtype)
    "f16": (2, "float16", "fp16", "<f2"), "bf16": (2, "bfloat16", "bf16", None), "f32": (4, "float32", "fp32", "<f4"),
    "f64": (8, "float64", "fp64", "<f8"), "i8": (1, "int8", "i8", "i1"), "u8": (1, "uint8", "u8", "u1"),
    "i16": (2, "int16", "i16", "<i2"), "u16": (2, "uint16", "u16", "<u2"), "i32": (4, "int32", "i32", "<i4"),
    "u32": (4, "uint32", "u32", "<u4"), "i64": (8, "int64", "i64", "<i8"), "u64": (8, "uint64", "u64", "<u8"),
}
# CUtensorMapDataType (host enum, after Triton's TMA_DTYPE_DEVICE_TO_HOST) -> kiln's tensor map dtype
TMA_DTYPES = {0: "u8", 1: "u16", 2: "u32", 3: "i32", 4: "u64", 5: "i64", 6: "f16", 7: "f32", 8: "f64", 9: "bf16",
              10: "f32_ftz", 11: "tf32", 12: "tf32_ftz"}
SWIZZLES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}  # CUtensorMapSwizzle; the 128B_ATOM_* kinds are refused
SCALAR_BYTES = {"i1": 1, "i8": 1, "u1": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
                "fp16": 2, "bf16": 2, "fp32": 4, "f32": 4, "fp64": 8}
KILN_SCALAR = {"i1": "i8", "u1": "u8", "i8": "i8", "u8": "u8", "i16": "i16", "u16": "u16", "i32": "i32", "u32": "u32",
               "i64": "i64", "u64": "u64", "fp16": "f16", "bf16": "bf16", "fp32": "f32", "f32": "f32", "fp64": "f64"}


class ExportError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# The call: tensors with symbolic shapes, scalars; what each kernel parameter gets
# ---------------------------------------------------------------------------------------------

class Tensor:
    """A pointer parameter of the call: a tensor of `dtype` with `shape` (expressions over the
    call's integer scalars); row-major contiguous unless `strides` (in elements) are given."""

    def __init__(self, name, dtype, shape, access="read_write", strides=None):
        if dtype not in KILN_DTYPES:
            raise ExportError(f"tensor {name}: unknown dtype {dtype!r}")
        self.name, self.dtype, self.shape, self.access = name, dtype, [str(s) for s in shape], access
        if strides is None:
            strides = [" * ".join(_paren(s) for s in self.shape[i + 1:]) or "1" for i in range(len(self.shape))]
        self.strides = [str(s) for s in strides]
        if len(self.strides) != len(self.shape):
            raise ExportError(f"tensor {name}: {len(shape)} dimensions but {len(strides)} strides")


class Scalar:
    def __init__(self, name, type="i32"):
        if type not in KILN_DTYPES or type.startswith("f") or type == "bf16":
            raise ExportError(f"scalar {name}: kiln computes integer scalars only ({type!r})")
        self.name, self.type = name, type


class Desc:
    """A host TensorDescriptor over the call's tensor `tensor`, with `block` (outermost first, as
    TensorDescriptor.block_shape) and padding "zero" or "nan"."""

    def __init__(self, tensor, block, padding="zero"):
        self.tensor, self.block, self.padding = tensor, list(block), padding


def tensor(name, dtype, shape, access="read_write", strides=None):
    return Tensor(name, dtype, shape, access, strides)


def scalar(name, type="i32"):
    return Scalar(name, type)


def desc(tensor_name, block, padding="zero"):
    return Desc(tensor_name, block, padding)


def _paren(e):
    e = str(e).strip()
    return e if re.fullmatch(r"[A-Za-z_]\w*|\d+", e) else f"({e})"


# ---------------------------------------------------------------------------------------------
# Expressions: kiln's language (C semantics on 64-bit integers), evaluated for fixed shapes
# ---------------------------------------------------------------------------------------------

def _tdiv(a, b):
    if b == 0:
        raise ZeroDivisionError
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def evaluate(expr, env):
    """The value of a kiln expression (integers, names, + - * / % unary -, cdiv, min, max,
    comparisons, && ||) with C's truncating division."""
    src = str(expr).replace("&&", " and ").replace("||", " or ")

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ExportError(f"expression {expr!r}: unknown name {node.id!r}")
            return env[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            op = type(node.op)
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op is ast.Div:
                return _tdiv(a, b)
            if op is ast.Mod:
                return a - _tdiv(a, b) * b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2:
            a, b = ev(node.args[0]), ev(node.args[1])
            fn = {"cdiv": lambda: -((-a) // b) if b else _tdiv(a, b),  # the ceiling of a / b
                  "min": lambda: min(a, b), "max": lambda: max(a, b)}.get(node.func.id)
            if fn:
                return fn()
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = ev(node.left), ev(node.comparators[0])
            return {ast.Eq: a == b, ast.NotEq: a != b, ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b,
                    ast.GtE: a >= b}[type(node.ops[0])]
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        raise ExportError(f"expression {expr!r}: not in kiln's expression language")

    return ev(ast.parse(src, mode="eval"))


# ---------------------------------------------------------------------------------------------
# Compiling as Triton's own launch would
# ---------------------------------------------------------------------------------------------

class _FakeDtype:
    def __init__(self, kiln_dtype):
        self.itemsize, self._name = KILN_DTYPES[kiln_dtype][0], KILN_DTYPES[kiln_dtype][1]
        self.is_floating_point = kiln_dtype.startswith(("f", "bf"))

    def __str__(self):
        return f"torch.{self._name}"


class _FakeTensor:
    """Stands for a tensor in the sample call: Triton's binder reads only data_ptr and dtype.
    The address is 256-aligned, as every PyTorch allocation is."""

    def __init__(self, t, env):
        self.dtype = _FakeDtype(t.dtype)
        self.shape = [evaluate(s, env) for s in t.shape]

    def data_ptr(self):
        return 1 << 40

    def stride(self):
        return None


def current_target():
    from triton.runtime import driver
    return driver.active.get_current_target()


def compile_kernel(fn, params, args, constexprs, options, sample, target=None):
    """Compiles `fn` for the call `sample` (values of the integer scalars) with Triton's own
    binder (so its specialisation is exactly what `fn[grid](...)` would pick) and returns
    (compiled kernel, Triton signature {name: type}, specialisation attrs by parameter name)."""
    target = target or current_target()
    if not isinstance(target, GPUTarget):
        target = GPUTarget("cuda", int(target[0]), int(target[1]) if len(target) > 1 else 32)
    backend = make_backend(target)
    by_name = {p.name: p for p in params}
    call = []
    for kp in fn.params:
        if kp.is_constexpr:
            continue
        a = args.get(kp.name)
        if a is None:
            raise ExportError(f"kernel parameter {kp.name!r} has no value in `args`")
        if isinstance(a, Desc):
            t = by_name.get(a.tensor)
            if not isinstance(t, Tensor):
                raise ExportError(f"{kp.name}: {a.tensor!r} is not a tensor of the call")
            base = _FakeTensor(t, sample)
            call.append(TensorDescriptor(base, base.shape, [evaluate(s, sample) for s in t.strides], a.block,
                                         a.padding))
        elif isinstance(by_name.get(a), Tensor):
            call.append(_FakeTensor(by_name[a], sample))
        else:
            call.append(evaluate(a, sample))
    kwargs = dict(constexprs)
    kwargs.update(options)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or triton.knobs.runtime.debug
    kwargs["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    positional = [c for c in call]
    names = [kp.name for kp in fn.params if not kp.is_constexpr]
    bound_args, specialization, opts = binder(**dict(zip(names, positional)), **kwargs)
    opts, signature, consts, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, opts)
    compiled = triton.compile(ASTSource(fn, signature, consts, attrs), target=target, options=opts.__dict__)
    attrs_by_name = {fn.arg_names[path[0]]: value for path, value in attrs.items() if len(path) == 1}
    return compiled, signature, attrs_by_name


# ---------------------------------------------------------------------------------------------
# The kernel's ABI
# ---------------------------------------------------------------------------------------------

def ptx_entry_params(ptx, entry):
    """[(bytes, align, is_pointer)] of `.entry entry(...)`."""
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


def kernel_abi(compiled, fn, params, args, signature, attrs):
    """The kernel_args entries (as dicts, in order) and the `where` conditions the compiled
    specialisation needs, checked against the PTX entry."""
    md = compiled.metadata
    by_name = {p.name: p for p in params}
    metas = list(getattr(md, "tensordesc_meta", None) or [])
    n_descs = sum(1 for v in signature.values() if isinstance(v, str) and v.startswith("tensordesc"))
    if metas and len(metas) != n_descs:
        raise ExportError(f"{len(metas)} tensordesc_meta entries for {n_descs} descriptors")
    entries, conditions, expected = [], [], []  # expected: (bytes, what) per PTX parameter
    desc_i = 0

    def computed(name, type_, value):
        if name in by_name:
            raise ExportError(f"kernel argument {name!r} would shadow the call parameter of that name")
        entries.append({"name": name, "type": type_, "value": str(value)})
        expected.append((KILN_DTYPES[type_][0], name))

    for kp in fn.params:
        ty = signature[kp.name]
        if ty == "constexpr":
            if not kp.is_constexpr:
                raise ExportError(f"Triton specialised {kp.name!r} to a constant for the sample call (it equals 1): "
                                  f"give a sample value other than 1, or declare it do_not_specialize")
            continue
        a = args[kp.name]
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            t = by_name[a.tensor]
            meta = metas[desc_i] if metas else None
            desc_i += 1
            rank = len(t.shape)
            m = re.match(r"tensordesc<([^[>]*)\[([^]]*)\]", ty)
            if KILN_DTYPES[t.dtype][2] != m.group(1):
                raise ExportError(f"{kp.name}: Triton typed the descriptor {m.group(1)}, the tensor is {t.dtype}")
            if meta is None:  # not lowered to TMA: base pointer, shape, strides, padding, shape, strides
                entries.append({"name": t.name})
                expected.append((8, t.name))
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
                if meta["elem_size"] != KILN_DTYPES[t.dtype][0]:
                    raise ExportError(f"{kp.name}: element size {meta['elem_size']} for a {t.dtype} tensor")
                if t.strides[-1] != "1":
                    raise ExportError(f"{kp.name}: the last dimension of {t.name} must be contiguous")
                block = list(meta["block_size"])
                if len(block) != rank:
                    raise ExportError(f"{kp.name}: block {block} for a rank-{rank} tensor")
                size = meta["elem_size"]
                tmap = {"pointer": t.name, "dtype": elem, "dims": list(reversed(t.shape)),
                        "strides": [f"{_paren(s)} * {size}" for s in reversed(t.strides[:-1])],
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
                raise ExportError(f"{kp.name} is a pointer; `args` must name a tensor of the call")
            t = by_name[a]
            if KILN_DTYPES[t.dtype][2] != ty.lstrip("*k"):
                raise ExportError(f"{kp.name}: Triton typed it {ty}, the tensor is {t.dtype}")
            entries.append({"name": a})
            expected.append((8, a))
        elif isinstance(ty, str) and ty in SCALAR_BYTES:
            kiln_type = KILN_SCALAR[ty]
            if isinstance(by_name.get(a), Scalar):
                if by_name[a].type != kiln_type:
                    raise ExportError(f"{kp.name}: Triton passes {ty}, the call's {a} is {by_name[a].type}")
                entries.append({"name": a})
                expected.append((SCALAR_BYTES[ty], a))
            else:
                computed(kp.name, kiln_type, a)
            for attr in attrs.get(kp.name, []):
                if attr[0] == "tt.divisibility":
                    conditions.append(f"{_paren(a)} % {attr[1]} == 0")
                else:
                    raise ExportError(f"{kp.name}: specialisation {attr} has no kiln condition")
        else:
            raise ExportError(f"{kp.name}: Triton type {ty!r} is not supported")
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


def _device_to_host_dtype(t):
    return {8: 10, 9: 8, 10: 9}.get(t, t)  # triton/backends/nvidia/driver.py TMA_DTYPE_DEVICE_TO_HOST


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


# ---------------------------------------------------------------------------------------------
# Shapes and the manifest
# ---------------------------------------------------------------------------------------------

class Shape:
    """values: fixed scalars; ranges: {name: [lo, hi]}; where: extra conditions. A shape with
    only values is written as a fixed shape (integers), else as a range shape (expressions)."""

    def __init__(self, name, values=None, ranges=None, where=()):
        self.name, self.values, self.ranges, self.where = name, dict(values or {}), dict(ranges or {}), list(where)

    @property
    def fixed(self):
        return not self.ranges and not self.where


class Test:
    def __init__(self, shape, inputs, outputs, values=None, tolerance=None):
        self.shape, self.inputs, self.outputs, self.values, self.tolerance = shape, inputs, outputs, values, tolerance


def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def ptx_target(ptx):
    return re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M).group(1)


def ptxas_release(cc):
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        return get_ptxas(cc).version
    except Exception:  # older Triton
        return None


def export(out, *, package, kernel_name, fn, params, args, constexprs, options, sample, grid, shapes,
           tests=(), tolerance=None, target=None, revision=None, sequence=1, description="", sources=(),
           extra_toolchain=None):
    """Compiles and writes the package folder `out`; returns (compiled kernel, manifest text)."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    compiled, signature, attrs = compile_kernel(fn, params, args, constexprs, options, sample, target)
    md = compiled.metadata
    entries, conditions = kernel_abi(compiled, fn, params, args, signature, attrs)
    block, shared, cluster, num_ctas = launch_config(compiled)
    grid = [str(g) for g in grid] + ["1"] * (3 - len(grid))
    if num_ctas > 1:
        grid[0] = f"{_paren(grid[0])} * {num_ctas}"  # kiln's grid counts blocks, Triton's programs

    ptx = compiled.asm["ptx"]
    arch = ptx_target(ptx)  # e.g. sm_90a
    stem = kernel_name
    files = {f"{stem}.{arch}.cubin": compiled.asm["cubin"], f"{stem}.compute_{arch[3:]}.ptx": ptx,
             f"{stem}.ttir": compiled.asm["ttir"], f"{stem}.ttgir": compiled.asm["ttgir"],
             f"{stem}.llir": compiled.asm["llir"]}
    src_files = []
    for s in sources or [inspect.getsourcefile(fn.fn)]:
        p = pathlib.Path(s)
        files[p.name] = p.read_text()
        src_files.append(p.name)
    meta = {k: v for k, v in md._asdict().items() if k not in ("extern_libs",)}
    meta["target"] = {"backend": md.target.backend, "arch": md.target.arch, "warp_size": md.target.warp_size}
    meta["signature"] = {k: str(v) for k, v in signature.items()}
    meta["specialisation"] = {k: v for k, v in attrs.items()}
    files["triton-metadata.json"] = json.dumps(meta, indent=1, default=str) + "\n"
    for fname, data in files.items():
        (out / fname).write_bytes(data if isinstance(data, bytes) else data.encode())

    scalars = {p.name for p in params if isinstance(p, Scalar)}
    ptxas = ptxas_release(md.target.arch)
    tc = {"framework": "triton", "triton": triton.__version__, "python": platform.python_version()}
    if ptxas:
        tc["cuda"] = ptxas
        tc["min_cuda_driver"] = ptxas
    tc.update({"triton_hash": md.hash, "num_warps": str(md.num_warps), "num_stages": str(md.num_stages),
               "num_ctas": str(num_ctas), "shared_mem": str(shared),
               "constexprs": ", ".join(f"{k}={v}" for k, v in constexprs.items()),
               "specialisation": "; ".join(conditions) or "none"})
    tc.update(extra_toolchain or {})
    lines = [f"# Exported by examples/triton/kiln_triton.py from Triton {triton.__version__}'s compiled kernel.",
             "[package]", f"name = {_toml(package)}",
             f"kernel_revision = {_toml(revision or f'triton-{triton.__version__}-{arch}-{md.hash[:12]}')}",
             f"sequence = {sequence}"]
    if description:
        lines.append(f"description = {_toml(description)}")
    lines += ["", "[toolchain]"] + [f"{k} = {_toml(v)}" for k, v in tc.items()]
    lines += ["", "[files]", 'extra = ["triton-metadata.json"]', "",
              "[[kernel]]", f"name = {_toml(kernel_name)}", f"entry = {_toml(md.name)}", 'backend = "cuda"',
              f"sources = {_toml(src_files)}",
              f"ir = {_toml([f'{stem}.ttir', f'{stem}.ttgir', f'{stem}.llir', f'{stem}.compute_{arch[3:]}.ptx'])}",
              "params = ["]
    for p in params:
        if isinstance(p, Tensor):
            lines.append(f"  {_toml({'name': p.name, 'type': 'ptr', 'dtype': p.dtype, 'access': p.access})},")
        else:
            lines.append(f"  {_toml({'name': p.name, 'type': p.type})},")
    lines += ["]", "kernel_args = ["]
    for e in entries:
        lines.append(f"  {_toml(e)},")
    lines += ["]", "code = [", f"  {_toml({'arch': arch, 'file': f'{stem}.{arch}.cubin'})},",
              f"  {_toml({'arch': f'compute_{arch[3:]}', 'file': f'{stem}.compute_{arch[3:]}.ptx'})},", "]"]
    if tolerance:
        lines.append(f"tolerance = {_toml(tolerance)}")
    lines.append("")
    for s in shapes:
        if set(s.values) & set(s.ranges):
            raise ExportError(f"shape {s.name}: a scalar is in both values and ranges")
        unknown = (set(s.values) | set(s.ranges)) - scalars
        if unknown:
            raise ExportError(f"shape {s.name}: {sorted(unknown)} are not integer scalars of the call")
        lines += ["[[kernel.shape]]", f"name = {_toml(s.name)}"]
        if s.fixed:
            missing = scalars - set(s.values)
            if missing:
                raise ExportError(f"fixed shape {s.name} leaves {sorted(missing)} without a value")
            for c in conditions:
                if not evaluate(c, s.values):
                    raise ExportError(f"fixed shape {s.name} breaks the compiled specialisation {c!r}")
            g = [evaluate(x, s.values) for x in grid]
            if cluster and g[0] % cluster[0]:
                raise ExportError(f"fixed shape {s.name}: grid {g} is not a multiple of the cluster {cluster}")
            lines += [f"values = {_toml(s.values)}", f"grid = {_toml(g)}"]
        else:
            if s.ranges:
                lines.append(f"ranges = {_toml(s.ranges)}")
            if s.values:
                lines.append(f"values = {_toml(s.values)}")
            where = list(s.where)
            for c in conditions:
                names = set(re.findall(r"[A-Za-z_]\w*", c)) - {"cdiv", "min", "max"}
                if names <= set(s.values):  # decided by the shape's fixed values alone
                    if not evaluate(c, s.values):
                        raise ExportError(f"shape {s.name} breaks the compiled specialisation {c!r}")
                elif c not in where:
                    where.append(c)
            if where:
                lines.append(f"where = {_toml(where)}")
            lines.append(f"grid = {_toml([int(x) if x.isdigit() else x for x in grid])}")
        lines += [f"block = {_toml(block)}", f"shared_mem = {shared}"]
        if cluster:
            lines.append(f"cluster = {_toml(cluster)}")
        lines.append("")
    for t in tests:
        lines += ["[[kernel.test]]", f"shape = {_toml(t.shape)}"]
        if t.values:
            lines.append(f"values = {_toml(t.values)}")
        lines += [f"inputs = {_toml(t.inputs)}", f"outputs = {_toml(t.outputs)}"]
        if t.tolerance:
            lines.append(f"tolerance = {_toml(t.tolerance)}")
        lines.append("")
    text = "\n".join(lines)
    (out / "kiln.toml").write_text(text)
    return compiled, text
