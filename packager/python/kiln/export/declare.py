"""What a user declares about a kernel's call: tensors with symbolic shapes, integer scalars,
Triton tensor descriptors, the shapes to serve and the test calls. The exporters turn these
into kiln.toml (`params`, `kernel.shape`, `kernel.test`)."""
from .errors import ExportError
from .expr import names_in, paren

# kiln dtype -> (element size, NumPy dtype or None, PyTorch dtype name)
DTYPES = {
    "f16": (2, "<f2", "float16"), "bf16": (2, None, "bfloat16"), "f32": (4, "<f4", "float32"),
    "f64": (8, "<f8", "float64"), "i8": (1, "i1", "int8"), "u8": (1, "u1", "uint8"), "i16": (2, "<i2", "int16"),
    "u16": (2, "<u2", "uint16"), "i32": (4, "<i4", "int32"), "u32": (4, "<u4", "uint32"), "i64": (8, "<i8", "int64"),
    "u64": (8, "<u8", "uint64"), "f8e4m3": (1, None, "float8_e4m3fn"), "f8e5m2": (1, None, "float8_e5m2"),
}
# Triton's and PyTorch's names for kiln's dtypes (a torch.dtype or a Triton type is named by its str()).
SPELLINGS = {"fp16": "f16", "float16": "f16", "half": "f16", "bfloat16": "bf16", "fp32": "f32", "float32": "f32",
             "float": "f32", "fp64": "f64", "float64": "f64", "double": "f64", "int8": "i8", "uint8": "u8",
             "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64",
             "fp8e4nv": "f8e4m3", "float8e4nv": "f8e4m3", "float8_e4m3fn": "f8e4m3",
             "fp8e5": "f8e5m2", "float8e5": "f8e5m2", "float8_e5m2": "f8e5m2"}
# 8-bit formats that are not OCP E4M3fn / E5M2 (other biases and NaN rules): refused by name.
OTHER_FP8 = ("fp8e4b15", "float8e4b15", "fp8e4b8", "float8e4b8", "fp8e5b16", "float8e5b16", "float8_e4m3fnuz",
             "float8_e5m2fnuz", "float8_e8m0fnu")


def canonical_dtype(dtype, what):
    """kiln's name for `dtype`: kiln's own (f16, bf16, f8e4m3, ...), Triton's (fp16, fp8e4nv, fp8e5)
    or PyTorch's (torch.bfloat16, torch.float8_e4m3fn, or the dtype object itself)."""
    text = str(dtype).rsplit(".", 1)[-1]
    if text in DTYPES:
        return text
    if text in SPELLINGS:
        return SPELLINGS[text]
    if text in OTHER_FP8:
        raise ExportError(f"{what}: {dtype} is an 8-bit float kiln does not carry: kiln's are f8e4m3 (OCP E4M3fn: "
                          "torch.float8_e4m3fn, Triton fp8e4nv) and f8e5m2 (E5M2); the fnuz and e4b15 formats "
                          "differ in bias and NaN")
    raise ExportError(f"{what}: unknown dtype {dtype!r} (kiln's are {', '.join(DTYPES)}; Triton's and PyTorch's "
                      "names are accepted)")


INTEGER_TYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
ACCESS = ("read", "write", "read_write")


class Tensor:
    """A pointer parameter of the call: a tensor of `dtype` whose `shape` is a list of integers or
    expressions over the call's integer scalars (["m", "k"]). Row-major and contiguous unless
    `strides` (in elements, expressions too) are given. `access` says whether the kernel reads it,
    writes it or both: test vectors are generated for what it reads and expected for what it writes."""

    def __init__(self, name, dtype, shape, access="read_write", strides=None):
        dtype = canonical_dtype(dtype, f"tensor {name!r}")
        if access not in ACCESS:
            raise ExportError(f"tensor {name!r}: access {access!r} is none of {', '.join(ACCESS)}")
        self.name, self.dtype, self.access = name, dtype, access
        self.shape = [str(s) for s in shape]
        if strides is None:
            strides = [" * ".join(paren(s) for s in self.shape[i + 1:]) or "1" for i in range(len(self.shape))]
        self.strides = [str(s) for s in strides]
        if len(self.strides) != len(self.shape):
            raise ExportError(f"tensor {name!r}: {len(self.shape)} dimensions but {len(self.strides)} strides")

    @property
    def reads(self):
        return self.access in ("read", "read_write")

    @property
    def writes(self):
        return self.access in ("write", "read_write")

    def manifest(self):
        return {"name": self.name, "type": "ptr", "dtype": self.dtype, "access": self.access}

    def __repr__(self):
        return f"Tensor({self.name!r}, {self.dtype!r}, {self.shape}, {self.access!r})"


class Scalar:
    """A scalar parameter of the call. Integer scalars may appear in shapes, grids and conditions;
    floating-point ones are passed through to the kernel as they are."""

    def __init__(self, name, type="i32"):
        type = canonical_dtype(type, f"scalar {name!r}")
        self.name, self.type = name, type

    @property
    def integer(self):
        return self.type in INTEGER_TYPES

    def manifest(self):
        return {"name": self.name, "type": self.type}

    def __repr__(self):
        return f"Scalar({self.name!r}, {self.type!r})"


class Desc:
    """A Triton host TensorDescriptor over the call's tensor `tensor`, with `block` (outermost
    first, as TensorDescriptor.block_shape) and padding "zero" or "nan"."""

    def __init__(self, tensor, block, padding="zero"):
        if padding not in ("zero", "nan"):
            raise ExportError(f"descriptor over {tensor!r}: padding {padding!r} is neither 'zero' nor 'nan'")
        self.tensor, self.block, self.padding = tensor, [int(b) for b in block], padding


class Shape:
    """A shape the package serves: fixed `values` of integer scalars, `ranges` {name: [lo, hi]}
    (inclusive) and extra `where` conditions. A shape with only values is a fixed shape."""

    def __init__(self, name, values=None, ranges=None, where=()):
        self.name, self.values = name, {k: int(v) for k, v in (values or {}).items()}
        self.ranges = {k: [int(v[0]), int(v[1])] for k, v in (ranges or {}).items()}
        self.where = [str(w) for w in where]
        both = set(self.values) & set(self.ranges)
        if both:
            raise ExportError(f"shape {name!r}: {sorted(both)} are in both values and ranges")
        for k, (lo, hi) in self.ranges.items():
            if lo > hi:
                raise ExportError(f"shape {name!r}: range of {k!r} is [{lo}, {hi}], empty")

    @property
    def fixed(self):
        return not self.ranges and not self.where


class Test:
    """A test call on a declared shape: `values` for the integer scalars the shape does not fix
    (a range shape's), optional `inputs` {tensor: array} instead of generated ones, `tolerance`
    {rtol, atol} for this test, and `seed` (default: the test's position)."""

    def __init__(self, shape, values=None, inputs=None, tolerance=None, seed=None):
        self.shape, self.values = shape, dict(values or {})
        self.inputs, self.tolerance, self.seed = dict(inputs or {}), tolerance, seed


def tensor(name, dtype, shape, access="read_write", strides=None):
    return Tensor(name, dtype, shape, access, strides)


def scalar(name, type="i32"):
    return Scalar(name, type)


def desc(tensor_name, block, padding="zero"):
    return Desc(tensor_name, block, padding)


def check_call(params, shapes, tests):
    """Refuses a call declaration that cannot be right, naming what: duplicate names, shapes that
    name no integer scalar, a fixed shape leaving a scalar the tensors' shapes need without a value,
    tests on undeclared shapes."""
    names = [p.name for p in params]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ExportError(f"the call declares {dupes} more than once")
    integers = {p.name for p in params if isinstance(p, Scalar) and p.integer}
    for p in params:
        if not isinstance(p, (Tensor, Scalar)):
            raise ExportError(f"params: {p!r} is neither kiln.export.tensor(...) nor kiln.export.scalar(...)")
        if isinstance(p, Tensor):
            unknown = set().union(*(names_in(e) for e in p.shape + p.strides)) - integers
            if unknown:
                raise ExportError(f"tensor {p.name!r}: its shape or strides use {sorted(unknown)}, which are not "
                                  f"integer scalars of the call ({', '.join(sorted(integers)) or 'none'})")
    shape_names = [s.name for s in shapes]
    if len(set(shape_names)) != len(shape_names):
        raise ExportError(f"shape names repeat: {shape_names}")
    for s in shapes:
        unknown = (set(s.values) | set(s.ranges) | set().union(*(names_in(w) for w in s.where))) - integers
        if unknown:
            raise ExportError(f"shape {s.name!r}: {sorted(unknown)} are not integer scalars of the call")
        if s.fixed and integers - set(s.values):
            raise ExportError(f"fixed shape {s.name!r} leaves {sorted(integers - set(s.values))} without a value "
                              "(give them values, or ranges to make it a range shape)")
    for t in tests:
        if t.shape not in shape_names:
            raise ExportError(f"test on shape {t.shape!r}, which is not declared (shapes: {', '.join(shape_names)})")
