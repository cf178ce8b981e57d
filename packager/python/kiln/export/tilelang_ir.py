"""A TileLang kernel's kiln description, read from the compiler's IR (never from generated code).

    describe(kernel, prim_func, ranges=None) -> {entry, params, kernel_args, shape, signature, dynamic}

`kernel` is the JITKernel `tilelang.compile(prim_func, ...)` returned, `prim_func` the program it
compiled (the TileLang PrimFunc), `ranges` {dynamic dimension: [min, max]} for a range shape.
The dict is what examples/tilelang/export_tilelang.py writes into kiln.toml (schema/MANIFEST.md,
`params`, `kernel_args`, `shape`):

  params       the call as a TileLang user makes it: the program's tensors in order (pointers
               with dtype and access), its scalars, then one integer scalar per dynamic dimension
               (T.dynamic / T.symbolic, named as the program names it);
  kernel_args  the device kernel's own parameter list (None when it is exactly `params`): a
               `tensor_map` recipe per CUtensorMap parameter, the call parameter a pointer or
               scalar parameter receives, or a computed integer scalar;
  shape        grid, block, dynamic shared memory (and cluster) of the launch, integers or
               expressions over the dynamic dimensions (with `ranges` and TMA's `where`);
  signature    [(kind, name, type, const)] of the device kernel: kind "tmap" (type
               "CUtensorMap"), "ptr" (type: the element dtype, e.g. "float16") or "scalar" (type:
               its dtype, e.g. "int32"); const as the CUDA code generator emits it;
  dynamic      the names of the dynamic dimensions.

Where each piece comes from (TileLang 0.1.15, TVM module `tvm.tirx`; older TVM: `tvm.tir`):

* The device kernel: the lowered device module `kernel.artifact.device_mod`, exactly one
  PrimFunc (the one nvcc compiled). Its params give the signature: a handle whose type
  annotation is a PointerType with storage scope "grid_constant" and element type uint8x128 is
  a CUtensorMap (TileLang's CUDA codegen prints exactly those as `__grid_constant__ const
  CUtensorMap`), any other handle a pointer to its element dtype, anything else a scalar;
  `const` for a pointer is its index in the attr "tl.readonly_param_indices" (what codegen uses
  to emit `const`). The launch tags (grid, block, dynamic shared memory, cluster, in the order
  the host passes their values) are the attr "tirx.kernel_launch_params".
* The launch values and tensor-map recipes: the host PrimFunc after
  `tilelang.engine.lower.lower_to_host_device_ir` (MakePackedAPI done, host codegen not yet).
  There the launch is `T.call_packed(entry, <kernel args>, <launch values>)` and each tensor map
  `T.call_packed("__tvm_tensormap_create_tiled", desc, dtype, rank, ptr, dims, strides, box,
  element strides, interleave, swizzle, l2 promotion, oob fill)`, all PrimExpr arguments. The
  later stage, host codegen's LowerTVMBuiltin, turns these calls into stores to a TVMFFIAny
  stack, and the default execution backend (tvm_ffi) keeps only the compiled runtime module in
  `kernel.artifact.host_mod`. So when `kernel.artifact.host_mod` is not an IRModule, this module
  lowers the kernel's PrimFunc again, with the kernel's own backend context, target and pass
  configs (no code generation, no nvcc), and checks that the device module this gives is
  structurally equal to `kernel.artifact.device_mod`, i.e. that the host IR read is the one of
  the compiled kernel. (With an execution backend that keeps the host IRModule, e.g. cython,
  that module is read as it is.)
* Host PrimExprs become kiln expressions by walking them: IntImm, the PrimFunc's own Vars
  (MakePackedAPI binds the program's tensor data Vars, scalar params and shape/stride Vars
  themselves, so they are recognised by identity), Bind/LetStmt-bound host Vars (substituted),
  Cast to an integer type (dropped), Add Sub Mul Div Mod FloorDiv FloorMod Min Max, shifts by a
  constant. Anything else (Select, if_then_else, loads of other buffers, float arithmetic, ...)
  is refused with an ExportError that names the node.
* Which tensor is read or written: the device body's BufferLoad/BufferStore and tvm_access_ptr
  masks, the tl.tma_load*/tl.tma_store* calls on each descriptor parameter, and the pointer
  parameters that "tl.readonly_param_indices" does not list (written by something else, e.g.
  an atomic).
"""
from __future__ import annotations

__all__ = ["ExportError", "describe", "host_ir", "to_kiln"]

# TileLang / TVM dtype -> kiln type
DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
          # OCP E4M3fn and E5M2 as TVM (and ml_dtypes) name them; its float8_e4m3 (with infinities)
          # and the fnuz formats are other formats, left unmapped (refused as unknown)
          "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
FLOATS = ("f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2")
# CUtensorMap enums as cuda.h numbers them -> the manifest's words
TMAP_DTYPES = ["u8", "u16", "u32", "i32", "u64", "i64", "f16", "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"]
INTERLEAVE = ["none", "16B", "32B"]
SWIZZLE = ["none", "32B", "64B", "128B"]
L2_PROMOTION = ["none", "64B", "128B", "256B"]
OOB_FILL = ["zero", "nan"]
TENSORMAP_TILED = "__tvm_tensormap_create_tiled"
TENSORMAP_IM2COL = "__tvm_tensormap_create_im2col"
# The device-side ops that take a CUtensorMap parameter, by what they do with the tensor.
TMA_READS = ("tma_load", "tma_prefetch")
TMA_WRITES = ("tma_store", "tma_reduce")
TMA_NEITHER = ("prefetch_tma_descriptor",)


from .errors import ExportError  # noqa: E402  (the kernel cannot be described, or its IR is not what this reader knows)


def _tir():
    """TVM's TIR module: `tvm.tirx` in the TVM TileLang 0.1.15 ships, `tvm.tir` before."""
    from tilelang import tvm

    return getattr(tvm, "tirx", None) or __import__("tvm.tir").tir


def _op_name(call):
    """'tvm_call_packed', 'tma_load', ... : a Call's op without its namespace ('tirx.', 'tl.')."""
    name = str(getattr(call.op, "name", ""))
    return name.rsplit(".", 1)[-1]


def _key(obj):
    """Identity of a TVM object (its handle), for dicts keyed by Var."""
    return obj.__chandle__() if hasattr(obj, "__chandle__") else obj.handle.value


def _attr(func, name, default):
    attrs = func.attrs
    return attrs[name] if attrs is not None and name in attrs else default


def kiln_type(dtype):
    kind = DTYPES.get(str(dtype))
    if kind is None:
        raise ExportError(f"TileLang dtype {dtype} has no kiln type")
    return kind


# ---------------------------------------------------------------- expression trees

def fold(tree):
    """Evaluates what has no names (C semantics: truncating division); returns an int or a tree.
    A tree is an int, ('name', call scalar) or (op, a, b) with op in + - * / % << >> min max."""
    if not isinstance(tree, tuple) or tree[0] == "name":
        return tree
    op, a, b = tree[0], fold(tree[1]), fold(tree[2])
    if isinstance(a, int) and isinstance(b, int):
        if op in "/%" and b == 0:
            raise ExportError("host expression divides by zero")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return {"+": a + b, "-": a - b, "*": a * b, "/": q, "%": a - q * b, "<<": a << b, ">>": a >> b,
                "min": min(a, b), "max": max(a, b)}[op]
    return (op, a, b)


def kiln_expr(tree):
    """A tree as the manifest's expression language (64-bit, C division). Shifts by a constant
    become multiplications and divisions by the power of two: host values here are sizes (>= 0)."""
    if isinstance(tree, int):
        return str(tree) if tree >= 0 else f"(-{-tree})"
    if tree[0] == "name":
        return tree[1]
    op, a, b = tree
    if op in ("<<", ">>"):
        if not isinstance(b, int) or not 0 <= b < 63:
            raise ExportError(f"shift by a non-constant in a host expression: {tree}")
        op, b = ("*" if op == "<<" else "/"), 1 << b
    if op in ("min", "max"):
        return f"{op}({kiln_expr(a)}, {kiln_expr(b)})"
    return f"({kiln_expr(a)} {op} {kiln_expr(b)})"


def manifest_value(tree):
    """An int, or the expression's text without its outermost parentheses."""
    tree = fold(tree)
    if isinstance(tree, int):
        return tree
    text = kiln_expr(tree)
    return text[1:-1] if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]) else text


def _balanced(text):
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


class _Host:
    """Turns the host PrimFunc's PrimExprs into trees over the call's names.

    Leaves: integers; the program's scalar params and the Vars of its tensors' shapes and strides
    (dynamic dimensions) -> ('name', their name); the program's tensor data Vars -> ('ptr', tensor
    name); the Vars the host binds to tensor-map descriptors -> ('desc', Var). Host Vars bound by
    Bind / LetStmt are substituted by their values."""

    def __init__(self, prim_func, host_func):
        tir = self.tir = _tir()
        self.leaf = {}
        for p in prim_func.params:
            if p in prim_func.buffer_map:
                buf = prim_func.buffer_map[p]
                self.leaf[_key(buf.data)] = ("ptr", buf.name)
                for extent in list(buf.shape) + list(buf.strides):  # the dynamic dimensions, as call_params
                    tir.stmt_functor.post_order_visit(
                        extent, lambda n: self.leaf.__setitem__(_key(n), ("name", n.name)) if isinstance(n, tir.Var)
                        else None)
            else:
                self.leaf[_key(p)] = ("name", str(p.name))
        self.float_names = {str(p.name) for p in prim_func.params
                            if p not in prim_func.buffer_map and str(p.dtype).startswith(("float", "bfloat"))}
        self.bound, self.calls = {}, []
        binds = tuple(getattr(tir, n) for n in ("Bind", "LetStmt") if hasattr(tir, n))

        def visit(node):
            if isinstance(node, binds):
                self.bound[_key(node.var)] = node.value
            elif isinstance(node, tir.Call) and _op_name(node) == "tvm_call_packed_lowered":
                raise ExportError("the host IR has lowered packed calls (a stage after LowerTVMBuiltin): "
                                  "describe needs it before host code generation")
            elif isinstance(node, tir.Call) and _op_name(node) == "tvm_call_packed":
                self.calls.append(node)

        tir.stmt_functor.post_order_visit(host_func.body, visit)
        # post_order_visit reaches a call's arguments before the call; statements come in order.
        for call in self.calls:
            if not isinstance(call.args[0], tir.StringImm):
                raise ExportError(f"a packed call's function is no name: {call}")

    def packed(self):
        """[(function name, [PrimExpr args])] for each call_packed, in program order."""
        return [(str(c.args[0].value), list(c.args[1:])) for c in self.calls]

    def tree(self, expr, what, depth=0):
        """expr as a tree (see the class). `what` names the value in a refusal."""
        tir = self.tir
        if depth > 64:
            raise ExportError(f"{what}: host expression {expr} nests too deeply")
        if isinstance(expr, tir.IntImm):
            return int(expr.value)
        if isinstance(expr, tir.Var):
            k = _key(expr)
            if k in self.leaf:
                return self.leaf[k]
            if k in self.bound:
                value = self.bound[k]
                if isinstance(value, tir.Call) and _op_name(value) == "tvm_stack_alloca":
                    return ("desc", k)
                return self.tree(value, what, depth + 1)
            raise ExportError(f"{what}: host variable '{expr.name}' is neither a parameter of the program nor "
                              "bound to a value computed from them")
        if isinstance(expr, tir.Cast):
            if not (str(expr.dtype).startswith(("int", "uint")) and str(expr.value.dtype).startswith(("int", "uint"))):
                raise ExportError(f"{what}: host expression {expr} casts {expr.value.dtype} to {expr.dtype}; only "
                                  "integer casts of sizes can be read")
            return self.tree(expr.value, what, depth + 1)  # sizes: well inside every integer type here
        if isinstance(expr, tir.Let):
            self.bound[_key(expr.var)] = expr.value
            return self.tree(expr.body, what, depth + 1)
        # FloorDiv / FloorMod round toward minus infinity, C's / and % (kiln's) toward zero: they
        # agree for a dividend >= 0 and a divisor > 0, which launch values and tensor-map sizes
        # (sizes, counts, byte strides) are.
        ops = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "FloorDiv": "/", "FloorMod": "%",
               "Min": "min", "Max": "max"}
        for cls, op in ops.items():
            if isinstance(expr, getattr(tir, cls)):
                if not str(expr.dtype).startswith(("int", "uint")):
                    raise ExportError(f"{what}: host expression {expr} is {expr.dtype} arithmetic; only integer "
                                      "arithmetic can be read")
                return (op, self._int(expr.a, what, depth), self._int(expr.b, what, depth))
        if isinstance(expr, tir.Call) and _op_name(expr) in ("shift_left", "shift_right"):
            op = "<<" if _op_name(expr) == "shift_left" else ">>"
            return (op, self._int(expr.args[0], what, depth), self._int(expr.args[1], what, depth))
        raise ExportError(f"{what}: host expression {expr} ({type(expr).__name__}) has no kiln equivalent; kiln "
                          "expressions take integers, the call's integer scalars, + - * / %, min and max")

    def _int(self, expr, what, depth):
        tree = self.tree(expr, what, depth + 1)
        if isinstance(tree, tuple) and tree[0] in ("ptr", "desc"):
            raise ExportError(f"{what}: host expression uses the pointer {expr} as an integer")
        if isinstance(tree, tuple) and tree[0] == "name" and tree[1] in self.float_names:
            raise ExportError(f"{what}: host expression uses the floating-point scalar '{tree[1]}' as an integer")
        return tree

    def value(self, expr, what):
        """An integer or an expression over the call's integer scalars (manifest form)."""
        return manifest_value(self._int(expr, what, 0))

    def constant(self, expr, what):
        v = self.value(expr, what)
        if not isinstance(v, int):
            raise ExportError(f"{what} is {v!r}, not a constant")
        return v


def to_kiln(expr, prim_func, host_func=None):
    """A host PrimExpr as a manifest value (int or expression text) over prim_func's names; for
    tests and for readers of other host IR."""
    tir = _tir()
    return _Host(prim_func, host_func or tir.PrimFunc([], tir.Evaluate(0))).value(expr, "value")


# ---------------------------------------------------------------- the IR

def host_ir(kernel, prim_func):
    """The host PrimFunc of `kernel` at the stage before host code generation (see the module's
    docstring), lowered again from the PrimFunc the kernel compiled where the kernel kept only
    its runtime module."""
    from tilelang import tvm

    tir = _tir()
    artifact = kernel.artifact
    mod = artifact.host_mod
    if not isinstance(mod, tvm.IRModule):
        # The PrimFunc the kernel lowered: the adapter's (the tvm_ffi backend stamps its ABI
        # attributes on a copy of prim_func that shares its Vars), else prim_func itself.
        func = prim_func
        adapted = getattr(getattr(kernel, "adapter", None), "ir_module", None)
        if isinstance(adapted, tvm.IRModule) and len(adapted.functions) == 1:
            candidate = list(adapted.functions.values())[0]
            if isinstance(candidate, tir.PrimFunc) and len(candidate.params) == len(prim_func.params) and \
                    all(a.same_as(b) for a, b in zip(candidate.params, prim_func.params)):
                func = candidate
        from tilelang.engine.lower import lower_to_host_device_ir

        with tvm.transform.PassContext(opt_level=3, config=dict(kernel.pass_configs or {})), kernel.target:
            mod, device, _, _, _ = lower_to_host_device_ir(func, kernel.backend_context)
        # map_free_vars: a dynamic dimension's Var appears in the kernel's thread_extent attr,
        # which the comparison meets before the params that define it
        if not tvm.ir.structural_equal(device, artifact.device_mod, map_free_vars=True):
            raise ExportError("lowering the program again gave another device module than the kernel's: "
                              "the prim_func is not the one this kernel compiled, or lowering is not deterministic")
    funcs = [f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)]
    if len(funcs) != 1:
        raise ExportError(f"the host module has {len(funcs)} PrimFuncs; expected the one entry function")
    return funcs[0]


def device_kernel(kernel):
    """(entry name, device PrimFunc): the one kernel the program lowers to."""
    artifact = kernel.artifact
    if artifact is None or artifact.device_mod is None:
        raise ExportError("TileLang gave no lowered device module (compile with the kernel cache disabled)")
    device = [(str(_attr(f, "global_symbol", gv.name_hint)), f) for gv, f in artifact.device_mod.functions.items()]
    if len(device) != 1:
        raise ExportError(f"the program lowers to {len(device)} device kernels ({[d[0] for d in device]}); "
                          "a kiln kernel launches one")
    return device[0]  # the name is the kernel's symbol: its global_symbol, which the host's call names


def signature(device_func):
    """[(kind, name, type, const)] of the device kernel's params (see the module's docstring)."""
    from tilelang import tvm

    readonly = {int(i) for i in _attr(device_func, "tl.readonly_param_indices", [])}
    out = []
    for i, p in enumerate(device_func.params):
        ann = p.type_annotation
        if str(p.dtype) == "handle":
            if not isinstance(ann, tvm.ir.PointerType):
                raise ExportError(f"kernel parameter {p.name} is a handle without a pointer type")
            element = str(getattr(ann.element_type, "dtype", ann.element_type))
            if ann.storage_scope == "grid_constant":
                if element != "uint8x128":
                    raise ExportError(f"kernel parameter {p.name} is a grid constant of {element}, not a CUtensorMap "
                                      "(uint8x128)")
                out.append(("tmap", str(p.name), "CUtensorMap", True))
            else:
                out.append(("ptr", str(p.name), element, i in readonly))
        else:
            kiln_type(p.dtype)
            out.append(("scalar", str(p.name), str(p.dtype), False))
    return out


def device_access(device_func, sig):
    """(read, written): the indices of the device params the kernel reads and writes."""
    tir = _tir()
    index = {_key(p): i for i, p in enumerate(device_func.params)}
    read, written = set(), set()

    def visit(node):
        if isinstance(node, tir.BufferLoad) and _key(node.buffer.data) in index:
            read.add(index[_key(node.buffer.data)])
        elif isinstance(node, tir.BufferStore) and _key(node.buffer.data) in index:
            written.add(index[_key(node.buffer.data)])
        elif isinstance(node, tir.Call):
            name = _op_name(node)
            if name == "tvm_access_ptr":
                mask, var = node.args[4], node.args[1]
                if isinstance(var, tir.Var) and _key(var) in index and isinstance(mask, tir.IntImm):
                    if mask.value & 1:
                        read.add(index[_key(var)])
                    if mask.value & 2:
                        written.add(index[_key(var)])
                return
            for arg in node.args:
                i = index.get(_key(arg)) if isinstance(arg, tir.Var) else None
                if i is None or sig[i][0] != "tmap":
                    continue
                if name.startswith(TMA_READS):
                    read.add(i)
                elif name.startswith(TMA_WRITES):
                    written.add(i)
                elif name not in TMA_NEITHER:
                    raise ExportError(f"the kernel passes the tensor map {sig[i][1]} to {node.op.name}, which this "
                                      "reader does not know to read or write it")

    tir.stmt_functor.post_order_visit(device_func.body, visit)
    marked = _attr(device_func, "tl.readonly_param_indices", None) is not None
    for i, (kind, _, _, const) in enumerate(sig):
        if kind == "ptr" and const:  # TileLang found no write (tl.readonly_param_indices)
            written.discard(i)
            read.add(i)
        elif kind == "ptr" and marked:  # TileLang found a write, maybe one no store shows (an atomic)
            written.add(i)
    return read, written


def call_params(prim_func, readonly, written):
    """The kiln call: tensors (pointers), the program's scalars, then the dynamic dimensions."""
    tir = _tir()
    params, dynamic = [], []
    for p in prim_func.params:
        if p in prim_func.buffer_map:
            buf = prim_func.buffer_map[p]
            name = buf.name
            access = "read" if name in readonly and name not in written else \
                     "write" if name in written and name not in readonly else "read_write"
            params.append(dict(name=name, type="ptr", dtype=kiln_type(buf.dtype), access=access))
            for extent in list(buf.shape) + list(buf.strides):
                found = []
                tir.stmt_functor.post_order_visit(extent, lambda n: found.append(n) if isinstance(n, tir.Var) else None)
                for var in found:
                    if not any(var.same_as(d) for d in dynamic):
                        dynamic.append(var)
        else:
            params.append(dict(name=str(p.name), type=kiln_type(p.dtype)))
    for var in dynamic:
        if any(p["name"] == var.name for p in params):
            continue
        params.append(dict(name=var.name, type=kiln_type(var.dtype), dynamic=True))
    return params


# ---------------------------------------------------------------- the description

def describe(kernel, prim_func, ranges=None):
    """{entry, params, kernel_args, shape, signature, dynamic} of a compiled TileLang kernel, read
    from its IR (see the module's docstring)."""
    entry, device_func = device_kernel(kernel)
    sig = signature(device_func)
    host = _Host(prim_func, host_ir(kernel, prim_func))
    calls = host.packed()

    # tensor maps, by descriptor Var
    recipes = {}
    for fn, args in calls:
        if fn == TENSORMAP_IM2COL:
            raise ExportError("the kernel uses an im2col tensor map, which the manifest cannot describe")
        if fn != TENSORMAP_TILED:
            continue
        desc = host.tree(args[0], "tensor map descriptor")
        label = f"tensor map {args[0]}"
        if not (isinstance(desc, tuple) and desc[0] == "desc"):
            raise ExportError(f"{label}: the descriptor is no stack allocation of the host")
        dtype, rank = host.constant(args[1], f"{label} dtype"), host.constant(args[2], f"{label} rank")
        pointer = host.tree(args[3], f"{label} address")
        if not (isinstance(pointer, tuple) and pointer[0] == "ptr"):
            raise ExportError(f"{label} describes {args[3]}, which is no tensor of the call")
        if len(args) != 8 + 4 * rank:
            raise ExportError(f"{label}: {len(args)} arguments for rank {rank}")
        at = lambda k, j, what: host.value(args[4 + k * rank + j], f"{label} {what}[{j}]")  # noqa: E731
        dims = [at(0, j, "dims") for j in range(rank)]
        strides = [at(1, j, "strides") for j in range(1, rank)]  # stride 0 is the element size; CUDA takes 1..rank-1
        box = [at(2, j, "box") for j in range(rank)]
        elem = [at(3, j, "element strides") for j in range(rank)]
        tail = [host.constant(args[4 + 4 * rank + j], f"{label} mode {j}") for j in range(4)]
        if not all(isinstance(v, int) for v in box + elem):
            raise ExportError(f"{label}: box and element strides must be constants")
        recipes[desc[1]] = dict(pointer=pointer[1], dtype=TMAP_DTYPES[dtype], dims=dims, strides=strides, box=box,
                                element_strides=elem, interleave=INTERLEAVE[tail[0]], swizzle=SWIZZLE[tail[1]],
                                l2_promotion=L2_PROMOTION[tail[2]], oob_fill=OOB_FILL[tail[3]])

    launch = [args for fn, args in calls if fn == entry]
    if len(launch) != 1:
        raise ExportError(f"the host code launches {entry} {len(launch)} times")
    args = launch[0]
    tags = [str(t) for t in _attr(device_func, "tirx.kernel_launch_params", None) or
            _attr(device_func, "tir.kernel_launch_params", [])]
    if len(args) != len(sig) + len(tags):
        raise ExportError(f"{entry} is launched with {len(args)} values for {len(sig)} parameters and tags {tags}")

    # what each kernel parameter receives: ('ptr', tensor), ('desc', key) or an integer tree
    received = [host.tree(args[i], f"kernel parameter {name}") for i, (_, name, _, _) in enumerate(sig)]
    read_i, written_i = device_access(device_func, sig)

    def tensor(i):
        got = received[i]
        if isinstance(got, tuple) and got[0] == "desc" and got[1] in recipes:
            return recipes[got[1]]["pointer"]
        if isinstance(got, tuple) and got[0] == "ptr":
            return got[1]
        return None

    params = call_params(prim_func, {tensor(i) for i in read_i} - {None}, {tensor(i) for i in written_i} - {None})
    by_name = {p["name"]: p for p in params}

    kernel_args = []
    for i, (kind, name, dtype, _) in enumerate(sig):
        got = received[i]
        if kind == "tmap":
            if not (isinstance(got, tuple) and got[0] == "desc" and got[1] in recipes):
                raise ExportError(f"kernel parameter {name} gets {args[i]}, which no tensor map call encodes")
            recipe = dict(recipes[got[1]])
            if recipe["dtype"] == by_name[recipe["pointer"]]["dtype"]:
                recipe.pop("dtype")
            for key, default in (("element_strides", [1] * len(recipe["box"])), ("interleave", "none"),
                                 ("swizzle", "none"), ("l2_promotion", "none"), ("oob_fill", "zero")):
                if recipe[key] == default:
                    recipe.pop(key)
            kernel_args.append(dict(name=name, tensor_map=recipe))
        elif kind == "ptr":
            if not (isinstance(got, tuple) and got[0] == "ptr"):
                raise ExportError(f"kernel parameter {name} gets {args[i]}, which is no tensor of the call")
            kernel_args.append(got[1])
        else:
            want = kiln_type(dtype)
            if want in FLOATS or (isinstance(got, tuple) and got[0] == "name" and got[1] in host.float_names):
                if not (isinstance(got, tuple) and got[0] == "name" and by_name.get(got[1], {}).get("type") == want):
                    raise ExportError(f"kernel parameter {name} ({dtype}) gets {args[i]}: only floating-point call "
                                      f"parameters of the same type can be passed through")
                kernel_args.append(got[1])
                continue
            value = host.value(args[i], f"kernel parameter {name}")
            if isinstance(value, str) and value in by_name and by_name[value]["type"] == want:
                kernel_args.append(value)
            else:
                label = name if name not in by_name else name + "_arg"
                kernel_args.append(dict(name=label, type=want, value=str(value)))
    plain = kernel_args == [p["name"] for p in params]

    # the launch: TVM's launch parameter tags, in order, after the kernel's arguments
    grid, block, cluster, smem = [1, 1, 1], [1, 1, 1], [1, 1, 1], 0
    for j, tag in enumerate(tags):
        v = host.value(args[len(sig) + j], f"launch value {tag}")
        axis = "xyz".index(tag[-1]) if tag[-1] in "xyz" else None
        if tag.startswith("blockIdx."):
            grid[axis] = v
        elif tag.startswith("threadIdx."):
            block[axis] = v
        elif tag.startswith(("tir.cluster_dim_", "tirx.cluster_dim_")):
            cluster[axis] = v
        elif tag in ("tirx.use_dyn_shared_memory", "tir.use_dyn_shared_memory"):
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
            raise ExportError(f"ranges name {sorted(ranges)}, which are no dynamic dimensions of this kernel")
        # TMA needs every stride a multiple of 16 bytes: said where a dimension is dynamic
        shape["where"] = [f"({s}) % 16 == 0" for a in kernel_args if isinstance(a, dict) and "tensor_map" in a
                          for s in a["tensor_map"]["strides"] if isinstance(s, str)]
        if not shape["where"]:
            del shape["where"]
    return dict(entry=entry, params=params, kernel_args=None if plain else kernel_args, shape=shape,
                signature=sig, dynamic=[p["name"] for p in dynamic])
