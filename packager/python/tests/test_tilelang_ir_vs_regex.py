"""The TileLang exporter's IR reading (kiln/export/tilelang_ir.py) against the regex reading it
replaced, kept here and only here: the previous examples/tilelang/export_tilelang.py read the launch
and the tensor-map recipes by regular expressions over TileLang's generated host C source and the
kernel's signature over the generated CUDA. Both must give the same description, except for the
signature's type column (C spelling before, TVM dtype now). Needs TileLang and nvcc; skipped otherwise.

    PYTHONPATH=<tilelang site> python -m pytest -q packager/python/tests/test_tilelang_ir_vs_regex.py
"""
import re

import pytest

pytest.importorskip("tilelang", reason="TileLang is not installed: the TileLang exporter is not tested")

from test_tilelang_ir import compiled, needs_nvcc, tl_ir  # noqa: E402

ExportError = tl_ir.ExportError


def tvm_tir():
    from tilelang import tvm

    return getattr(tvm, "tirx", None) or __import__("tvm.tir").tir


# ================================================================ the regex reading, as it was
# (examples/tilelang/export_tilelang.py at 6d9133d, describe() and what only it used)

DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64"}
# kernel parameter C type -> kiln scalar type
CTYPES = {"int": "i32", "int32_t": "i32", "unsigned int": "u32", "uint": "u32", "uint32_t": "u32", "int64_t": "i64",
          "long long": "i64", "uint64_t": "u64", "short": "i16", "int16_t": "i16", "uint16_t": "u16",
          "signed char": "i8", "char": "i8", "int8_t": "i8", "uint8_t": "u8", "float": "f32", "double": "f64",
          "half_t": "f16", "half": "f16", "bfloat16_t": "bf16"}
# CUtensorMap enums as cuda.h numbers them -> the manifest's words
TMAP_DTYPES = ["u8", "u16", "u32", "i32", "u64", "i64", "f16", "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"]
INTERLEAVE = ["none", "16B", "32B"]
SWIZZLE = ["none", "32B", "64B", "128B"]
L2_PROMOTION = ["none", "64B", "128B", "256B"]
OOB_FILL = ["zero", "nan"]


# ---------------------------------------------------------------- host expressions -> kiln expressions

_TOKEN = re.compile(r"\s*(?:(\d+)(?:[uUlL]*)|([A-Za-z_]\w*)|(>>|<<|[-+*/%(),]))")
_CAST = re.compile(r"\(\s*(?:const\s+)?(?:u?int(?:8|16|32|64)_t|int|long long|unsigned int|size_t)\s*\)")


def _tokens(text):
    text = _CAST.sub(" ", text)  # integer casts: values are sizes well inside every type here
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ExportError(f"cannot read host expression {text!r} at {text[pos:]!r}")
        pos = m.end()
        out.append(("int", int(m.group(1))) if m.group(1) else ("name", m.group(2)) if m.group(2) else ("op", m.group(3)))
    return out


class Expr:
    """A host integer expression: an int, a name, or (op, lhs, rhs) / (fn, args)."""

    def __init__(self, text, names):
        self.text, self.names, self.toks, self.i = text, names, _tokens(text), 0
        self.tree = self._binary(0)
        if self.i != len(self.toks):
            raise ExportError(f"cannot read host expression {text!r}")

    _PREC = [("<<", ">>"), ("+", "-"), ("*", "/", "%")]

    def _peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def _binary(self, level):
        if level == len(self._PREC):
            return self._unary()
        lhs = self._binary(level + 1)
        while self._peek()[0] == "op" and self._peek()[1] in self._PREC[level]:
            op = self.toks[self.i][1]
            self.i += 1
            lhs = (op, lhs, self._binary(level + 1))
        return lhs

    def _unary(self):
        kind, value = self._peek()
        self.i += 1
        if kind == "int":
            return value
        if kind == "op" and value == "-":
            return ("-", 0, self._unary())
        if kind == "op" and value == "(":
            inner = self._binary(0)
            self._expect(")")
            return inner
        if kind == "name" and value in ("min", "max") and self._peek() == ("op", "("):
            self.i += 1
            a = self._binary(0)
            self._expect(",")
            b = self._binary(0)
            self._expect(")")
            return (value, a, b)
        if kind == "name":
            if value not in self.names:
                raise ExportError(f"host expression {self.text!r} uses '{value}', which is neither a call scalar nor "
                                  f"a host variable computed from them")
            if self.names[value][0] == "ptr":
                raise ExportError(f"host expression {self.text!r} uses the pointer '{value}' as an integer")
            return self.names[value]
        raise ExportError(f"cannot read host expression {self.text!r}")

    def _expect(self, op):
        if self._peek() != ("op", op):
            raise ExportError(f"cannot read host expression {self.text!r}: expected '{op}'")
        self.i += 1


# The expression trees are the same in both readers: only how they are read differs.
fold, kiln_expr, manifest_value = tl_ir.fold, tl_ir.kiln_expr, tl_ir.manifest_value


# ---------------------------------------------------------------- reading TileLang's output

def kernel_signature(cuda, entry):
    """[(kind, name, ctype, const)] of the kernel's definition: kind tmap, ptr or scalar."""
    m = re.search(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?" + re.escape(entry) + r"\s*\(([^()]*)\)\s*\{", cuda)
    if not m:
        raise ExportError(f"no definition of __global__ {entry} in the CUDA source")
    params = []
    for raw in filter(None, (p.strip() for p in m.group(1).split(","))):
        name = re.search(r"(\w+)\s*$", raw).group(1)
        decl = re.sub(r"\b(__restrict__|__grid_constant__|volatile)\b", " ", raw[: -len(name)]).strip()
        if "CUtensorMap" in decl:
            params.append(("tmap", name, "CUtensorMap", True))
        elif decl.endswith("*"):
            params.append(("ptr", name, decl, decl.startswith("const")))
        else:
            ctype = " ".join(decl.replace("const", " ").split())
            if ctype not in CTYPES:
                raise ExportError(f"kernel parameter '{raw}': type {ctype!r} has no kiln scalar type")
            params.append(("scalar", name, ctype, False))
    return params


def packed_calls(host):
    """[(function name, nargs, {slot: (field, expr)})] for each TVMFFIFunctionCall, in order."""
    names = dict((var, fn) for fn, var in re.findall(r'TVMBackendGetFuncFromEnv\(\w+, "([^"]+)", &(\w+)\)', host))
    calls, start = [], 0
    for m in re.finditer(r"TVMFFIFunctionCall\((\w+), \(TVMFFIAny\*\) stack_ffi_any, (\d+),", host):
        slots = {}
        for slot, field, expr in re.findall(r"\(\(\(TVMFFIAny\*\)stack_ffi_any\)\[(\d+)\]\.(v_int64|v_ptr|v_float64)\) = (.*?);\n",
                                            host[start:m.start()]):
            slots[int(slot)] = (field, expr.strip())  # the last assignment of a slot wins (v_int64 = 0 then v_ptr)
        calls.append((names.get(m.group(1), m.group(1)), int(m.group(2)), slots))
        start = m.end()
    return calls


def host_names(host, prim_func):
    """Host variables -> ('name', kiln name) trees: data pointers -> tensor names, shape reads of
    dynamic dimensions -> their names, and plain integer lets over those, substituted."""
    params = [str(p.name) for p in prim_func.params]
    handle_index = {h: int(i) for h, i in re.findall(r"void\* (\w+) = .*?\(\(TVMFFIAny\*\)args\)\[(\d+)\]\.v_ptr\)\)?;", host)}
    tensors, names = {}, {}
    for p in prim_func.params:
        if p in prim_func.buffer_map:
            tensors[str(p.name)] = prim_func.buffer_map[p].name
        else:
            names[str(p.name)] = ("name", str(p.name))
    for var, handle in re.findall(r"void\* (\w+) = \(\(\(DLTensor\*\)(\w+)\)\[0\]\.data\);", host):
        index = handle_index.get(handle)
        if index is not None and params[index] in tensors:
            names[var] = ("ptr", tensors[params[index]])
    for ctype, var, rest in re.findall(r"^\s*(int32_t|int64_t|uint32_t|uint64_t) (\w+) = (.*);$", host, re.M):
        m = re.fullmatch(r"\(\((?:int32_t|int64_t)\)\(\(int64_t\*\)\w+_shape\)\[\d+\]\)", rest)
        if m:
            names[var] = ("name", var)  # a dynamic dimension, named as TileLang names it
            continue
        try:
            names[var] = Expr(rest, names).tree
        except ExportError:
            pass  # a let no launch value uses (checks, device ids)
    return names


def scalar_type(dtype):
    kind = DTYPES.get(str(dtype))
    if kind is None:
        raise ExportError(f"TileLang dtype {dtype} has no kiln type")
    return kind


def call_params(prim_func, readonly, written):
    """The kiln call: tensors (pointers), the program's scalars, then the dynamic dimensions."""
    tir = tvm_tir()

    params, dynamic = [], []
    for p in prim_func.params:
        if p in prim_func.buffer_map:
            buf = prim_func.buffer_map[p]
            name = buf.name
            access = "read" if name in readonly and name not in written else \
                     "write" if name in written and name not in readonly else "read_write"
            params.append(dict(name=name, type="ptr", dtype=scalar_type(buf.dtype), access=access))
            for extent in list(buf.shape) + list(buf.strides):
                for var in _vars(extent, tir):
                    if var not in dynamic:
                        dynamic.append(var)
        else:
            params.append(dict(name=str(p.name), type=scalar_type(p.dtype)))
    for var in dynamic:
        if any(p["name"] == var.name for p in params):
            continue
        params.append(dict(name=var.name, type=scalar_type(var.dtype), dynamic=True))
    return params


def _vars(expr, tir):
    found = []
    tir.stmt_functor.post_order_visit(expr, lambda n: found.append(n) if isinstance(n, tir.Var) else None)
    return found


def buffer_access(device_func, cuda, signature):
    """(read, written) tensor data-pointer names: TIR loads and stores of plain pointers, and the
    TMA copies of each descriptor in the CUDA source (X_desc: tma_load reads, tma_store writes)."""
    tir = tvm_tir()

    read, written = set(), set()

    def visit(node):
        if isinstance(node, tir.BufferLoad):
            read.add(node.buffer.data.name)
        elif isinstance(node, tir.BufferStore):
            written.add(node.buffer.data.name)
        elif isinstance(node, tir.Call) and str(getattr(node.op, "name", "")).endswith(".tvm_access_ptr"):
            mask = node.args[4]
            var = node.args[1].name if isinstance(node.args[1], tir.Var) else None
            if var and isinstance(mask, tir.IntImm):
                if mask.value & 1:
                    read.add(var)
                if mask.value & 2:
                    written.add(var)

    tir.stmt_functor.post_order_visit(device_func.body, visit)
    for kind, name, _, const in signature:
        if kind == "tmap":
            if re.search(r"tma_(?:load|prefetch)\w*\(\s*" + name + r"\b", cuda):
                read.add(name)
            if re.search(r"tma_(?:store|reduce)\w*\(\s*" + name + r"\b", cuda):
                written.add(name)
        elif kind == "ptr" and const:
            written.discard(name)
            read.add(name)
    return read, written


def describe(kernel, prim_func, ranges=None):
    """Reads TileLang's output into {entry, params, kernel_args, shape, signature}."""
    cuda, host = kernel.get_kernel_source(), kernel.get_host_source()
    if kernel.artifact is None or kernel.artifact.device_mod is None:
        raise ExportError("TileLang gave no lowered device module (compile with the kernel cache disabled)")
    device = [(str(gv.name_hint), f) for gv, f in kernel.artifact.device_mod.functions.items()]
    if len(device) != 1:
        raise ExportError(f"the program lowers to {len(device)} device kernels ({[d[0] for d in device]}); "
                          "a kiln kernel launches one")
    entry, device_func = device[0]
    signature = kernel_signature(cuda, entry)
    read, written = buffer_access(device_func, cuda, signature)
    names = host_names(host, prim_func)
    calls = packed_calls(host)

    # tensor maps, by descriptor variable
    recipes = {}
    for fn, nargs, slots in calls:
        if fn == "__tvm_tensormap_create_im2col":
            raise ExportError("the kernel uses an im2col tensor map, which the manifest cannot describe")
        if fn != "__tvm_tensormap_create_tiled":
            continue
        value = lambda i: fold(Expr(slots[i][1], names).tree)  # noqa: E731
        desc, dtype, rank = slots[0][1], value(1), value(2)
        pointer = names.get(slots[3][1])
        if not pointer or pointer[0] != "ptr":
            raise ExportError(f"tensor map {desc} describes {slots[3][1]!r}, which is no tensor of the call")
        if nargs != 8 + 4 * rank:
            raise ExportError(f"tensor map {desc}: {nargs} arguments for rank {rank}")
        at = lambda k, j: manifest_value(Expr(slots[4 + k * rank + j][1], names).tree)  # noqa: E731
        dims = [at(0, j) for j in range(rank)]
        strides = [at(1, j) for j in range(1, rank)]  # stride 0 is the element size; CUDA takes 1..rank-1
        box = [at(2, j) for j in range(rank)]
        elem = [at(3, j) for j in range(rank)]
        tail = [value(4 + 4 * rank + j) for j in range(4)]
        if not all(isinstance(v, int) for v in box + elem + tail):
            raise ExportError(f"tensor map {desc}: box, element strides and modes must be constants")
        recipes[desc] = dict(pointer=pointer[1], dtype=TMAP_DTYPES[dtype], dims=dims, strides=strides, box=box,
                             element_strides=elem, interleave=INTERLEAVE[tail[0]], swizzle=SWIZZLE[tail[1]],
                             l2_promotion=L2_PROMOTION[tail[2]], oob_fill=OOB_FILL[tail[3]])

    launch = [c for c in calls if c[0] == entry]
    if len(launch) != 1:
        raise ExportError(f"the host code launches {entry} {len(launch)} times")
    _, nargs, slots = launch[0]
    params = call_params(prim_func, {recipes.get(n, {}).get("pointer", n) for n in read},
                         {recipes.get(n, {}).get("pointer", n) for n in written})
    by_name = {p["name"]: p for p in params}

    kernel_args = []
    for i, (kind, name, ctype, _) in enumerate(signature):
        field, text = slots[i]
        if kind == "tmap":
            if text not in recipes:
                raise ExportError(f"kernel parameter {name} gets {text!r}, which no tensor map call encodes")
            recipe = dict(recipes[text])
            if recipe["dtype"] == by_name[recipe["pointer"]]["dtype"]:
                recipe.pop("dtype")
            for key, default in (("element_strides", [1] * len(recipe["box"])), ("interleave", "none"),
                                 ("swizzle", "none"), ("l2_promotion", "none"), ("oob_fill", "zero")):
                if recipe[key] == default:
                    recipe.pop(key)
            kernel_args.append(dict(name=name, tensor_map=recipe))
        elif kind == "ptr":
            target = names.get(text)
            if field != "v_ptr" or not target or target[0] != "ptr":
                raise ExportError(f"kernel parameter {name} gets {text!r}, which is no tensor of the call")
            kernel_args.append(target[1])
        else:
            want = CTYPES[ctype]
            if field == "v_float64" or want in ("f16", "bf16", "f32", "f64"):
                idents = [names.get(t) for t in re.findall(r"[A-Za-z_]\w*", text) if t not in ("float", "double")]
                if len(idents) != 1 or not idents[0] or idents[0][0] != "name" or \
                        by_name.get(idents[0][1], {}).get("type") != want:
                    raise ExportError(f"kernel parameter {name} ({ctype}) gets {text!r}: only floating-point call "
                                      f"parameters of the same type can be passed through")
                kernel_args.append(idents[0][1])
                continue
            value = manifest_value(Expr(text, names).tree)
            if isinstance(value, str) and value in by_name and by_name[value]["type"] == want:
                kernel_args.append(value)
            else:
                label = name if name not in by_name else name + "_arg"
                kernel_args.append(dict(name=label, type=want, value=str(value)))
    plain = kernel_args == [p["name"] for p in params]

    # the launch: TVM's launch parameter tags, in order, after the kernel's arguments
    tags = [str(t) for t in device_func.attrs["tirx.kernel_launch_params"]]
    if nargs != len(signature) + len(tags):
        raise ExportError(f"{entry} is launched with {nargs} values for {len(signature)} parameters and tags {tags}")
    grid, block, cluster, smem = [1, 1, 1], [1, 1, 1], [1, 1, 1], 0
    for j, tag in enumerate(tags):
        v = manifest_value(Expr(slots[len(signature) + j][1], names).tree)
        axis = "xyz".index(tag[-1]) if tag[-1] in "xyz" else None
        if tag.startswith("blockIdx."):
            grid[axis] = v
        elif tag.startswith("threadIdx."):
            block[axis] = v
        elif tag.startswith("tir.cluster_dim_"):
            cluster[axis] = v
        elif tag == "tirx.use_dyn_shared_memory":
            smem = v
        else:
            raise ExportError(f"launch tag {tag} (programmatic dependent or cooperative launch) has no kiln equivalent")
    if not all(isinstance(v, int) for v in cluster):
        raise ExportError(f"cluster dimensions {cluster} are not constants")

    dynamic = [p for p in params if p.pop("dynamic", False)]
    shape = dict(grid=grid, block=block, shared_mem=smem)
    if cluster != [1, 1, 1]:
        shape["cluster"] = cluster
    if dynamic:
        ranges = dict(ranges or {})
        shape["ranges"] = {p["name"]: ranges.pop(p["name"], [1, 2**31 - 1 if p["type"] == "i32" else 2**40])
                           for p in dynamic}
        if ranges:
            raise ExportError(f"--range names {sorted(ranges)}, which are no dynamic dimensions of this kernel")
        # TMA needs every stride a multiple of 16 bytes: said where a dimension is dynamic
        shape["where"] = [f"({s}) % 16 == 0" for a in kernel_args if isinstance(a, dict) and "tensor_map" in a
                          for s in a["tensor_map"]["strides"] if isinstance(s, str)]
        if not shape["where"]:
            del shape["where"]
    return dict(entry=entry, params=params, kernel_args=None if plain else kernel_args, shape=shape,
                signature=signature, dynamic=[p["name"] for p in dynamic])


# ================================================================ the comparison

# the C spelling TileLang's CUDA codegen gives a parameter -> the TVM dtype the IR reading reports
C_TO_DTYPE = {"half_t": "float16", "bfloat16_t": "bfloat16", "float": "float32", "double": "float64",
              "int": "int32", "int64_t": "int64", "unsigned int": "uint32", "uint": "uint32", "char": "int8",
              "signed char": "int8", "short": "int16", "unsigned char": "uint8", "uchar": "uint8"}


def _signature_in_dtypes(sig):
    out = []
    for kind, name, ctype, const in sig:
        if kind == "ptr":
            ctype = C_TO_DTYPE[ctype.replace("const", "").replace("*", "").strip()]
        elif kind == "scalar":
            ctype = C_TO_DTYPE[ctype]
        out.append((kind, name, ctype, const))
    return out


CASES = [("gemm", "sm_90a"), ("gemm-cp-async", "sm_90a"), ("fa", "sm_90a"), ("gemm-dynamic-m", "sm_90a"),
         ("gemm", "sm_80"), ("fa", "sm_80"), ("scale", "sm_80")]


@needs_nvcc
@pytest.mark.parametrize("key,arch", CASES, ids=[f"{k}-{a}" for k, a in CASES])
def test_ir_reading_equals_regex_reading(key, arch):
    kernel, prim_func, spec = compiled(key, arch)
    old = describe(kernel, prim_func, spec.get("ranges"))
    new = tl_ir.describe(kernel, prim_func, spec.get("ranges"))
    old_sig, new_sig = old.pop("signature"), new.pop("signature")
    assert new == old
    assert new_sig == _signature_in_dtypes(old_sig)
