"""Test vectors from the user's reference: for each declared test call, seeded inputs of the
declared shapes, the reference run on them (PyTorch on the CPU, or NumPy), and the inputs and
expected outputs written as .npy files, so `kiln verify --run` can prove the export on the
target GPU (schema/MANIFEST.md, "test entries")."""
import io

from . import narrow
from .declare import DTYPES, Scalar, Tensor
from .errors import ExportError
from .expr import evaluate

# Default tolerances by output dtype, for a GPU kernel against a CPU reference of the same maths
# (accumulation order differs): a few units in the last place of the type, loosely; for fp8, one
# unit (E4M3 steps by 2^-3 relative, E5M2 by 2^-2) and a few of its smallest subnormal.
_TOLERANCE = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 2e-2), "f32": (1e-4, 1e-5), "f64": (1e-10, 1e-12),
              "f8e4m3": (0.125, 2 ** -7), "f8e5m2": (0.25, 2 ** -14)}


def storage(dtype):
    """The NumPy dtype of a vector of `dtype`: its own, or its raw bits (bf16, fp8)."""
    return DTYPES[dtype][1] or narrow.raw_dtype(dtype)


def default_tolerance(params):
    """The loosest default over the written floating-point tensors (None if they are integers)."""
    found = [_TOLERANCE[p.dtype] for p in params if isinstance(p, Tensor) and p.writes and p.dtype in _TOLERANCE]
    if not found:
        return None
    return {"rtol": max(r for r, _ in found), "atol": max(a for _, a in found)}


def _numpy():
    try:
        import numpy
        return numpy
    except ImportError:
        raise ExportError("test vectors need NumPy (pip install numpy)") from None


def reference_kind(kind):
    """'torch' or 'numpy': what the reference receives. 'auto' is PyTorch where it is importable."""
    if kind not in ("auto", "torch", "numpy"):
        raise ExportError(f"reference_kind {kind!r} is none of auto, torch, numpy")
    if kind == "auto":
        try:
            import torch  # noqa: F401
            return "torch"
        except ImportError:
            return "numpy"
    return kind


def call_values(shape, test, params, derived=()):
    """The integer scalars (shape values + test values) and float scalars of a test call; checks
    that every scalar has a value and that the call belongs to its shape: its ranges, its `where`
    and the `derived` conditions [(condition, where it came from)] the export adds to range shapes."""
    ints, floats = dict(shape.values), {}
    for p in params:
        if not isinstance(p, Scalar):
            continue
        if p.name in test.values:
            if p.name in shape.values:
                raise ExportError(f"test on {shape.name!r}: {p.name} is fixed by the shape; do not give it again")
            (ints if p.integer else floats)[p.name] = test.values[p.name]
        if p.name not in ints and p.name not in floats:
            raise ExportError(f"test on {shape.name!r}: no value for scalar {p.name!r} (give Test(values={{...}}))")
    unknown = set(test.values) - {p.name for p in params}
    if unknown:
        raise ExportError(f"test on {shape.name!r}: values for {sorted(unknown)}, which are not scalars of the call")
    for name, (lo, hi) in shape.ranges.items():
        if not lo <= ints[name] <= hi:
            raise ExportError(f"test on {shape.name!r}: {name}={ints[name]} is outside the shape's range [{lo}, {hi}]")
    for w in shape.where:
        if not evaluate(w, ints):
            raise ExportError(f"test on {shape.name!r}: {ints} breaks the shape's condition {w!r}")
    if not shape.fixed:
        for condition, origin in derived:
            if not evaluate(condition, ints):
                raise ExportError(f"test on {shape.name!r}: {ints} breaks the condition {condition!r}, {origin}; "
                                  "give a sample the test's values satisfy, or test other values")
    return {k: int(v) for k, v in ints.items()}, {k: float(v) for k, v in floats.items()}


def _generate(np, rng, p, dims):
    kind = DTYPES[p.dtype][1]
    if narrow.is_raw(p.dtype):
        return narrow.encode(np, rng.uniform(-1.0, 1.0, size=dims), p.dtype, f"tensor {p.name!r}")
    if p.dtype.startswith("f"):
        return rng.uniform(-1.0, 1.0, size=dims).astype(kind)
    lo, hi = (0, 16) if p.dtype.startswith("u") else (-8, 8)
    return rng.integers(lo, hi, size=dims).astype(kind)


def _as_numpy(np, value, p, dims):
    """`value` (an input given, or what the reference wrote) as the vector of tensor p: of its
    dtype, or for bf16 and fp8 its raw bits, a torch tensor of that dtype taken bit for bit and
    any other numbers rounded to the type (nearest, ties to even)."""
    raw = narrow.is_raw(p.dtype)
    if hasattr(value, "detach"):  # a torch.Tensor
        value = value.detach().cpu()
        if raw and str(value.dtype).rsplit(".", 1)[-1] == DTYPES[p.dtype][2]:
            import torch
            value = value.view(torch.int16 if p.dtype == "bf16" else torch.uint8).numpy().view(storage(p.dtype))
            raw = False  # already the bits
        else:
            value = value.float().numpy() if raw else value.numpy()
    array = np.asarray(value)
    if list(array.shape) != list(dims) and array.size != int(np.prod(dims, dtype=np.int64)):
        raise ExportError(f"{p.name}: the reference gave shape {list(array.shape)}, the call's is {dims}")
    array = np.ascontiguousarray(array.reshape(dims))
    if raw:
        return narrow.encode(np, array, p.dtype, f"tensor {p.name!r}")
    return array.astype(storage(p.dtype))


def npy_bytes(np, array):
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def build_tests(stem, params, shapes, tests, reference, kind="auto", derived=()):
    """(test tables for kiln.toml, {file name: bytes}) for `tests` on `shapes`; `derived` as for
    call_values."""
    if not tests:
        return [], {}
    if reference is None:
        raise ExportError("tests are declared but no reference is given (reference=fn)")
    np = _numpy()
    kind = reference_kind(kind)
    by_name = {s.name: s for s in shapes}
    tables, files = [], {}
    for index, test in enumerate(tests):
        shape = by_name[test.shape]
        ints, floats = call_values(shape, test, params, derived)
        rng = np.random.default_rng(test.seed if test.seed is not None else 1000 + index)
        arrays, dims_of = {}, {}
        for p in params:
            if not isinstance(p, Tensor):
                continue
            default_strides = Tensor(p.name, p.dtype, p.shape).strides
            if p.strides != default_strides:
                raise ExportError(f"tensor {p.name!r} has its own strides: generated test vectors are row-major only")
            dims = [evaluate(e, ints) for e in p.shape]
            if any(d < 0 for d in dims):
                raise ExportError(f"test on {shape.name!r}: tensor {p.name!r} has negative dimensions {dims}")
            dims_of[p.name] = dims
            if p.name in test.inputs:
                arrays[p.name] = _as_numpy(np, test.inputs[p.name], p, dims)
            elif p.reads:
                arrays[p.name] = _generate(np, rng, p, dims)
            else:
                arrays[p.name] = np.zeros(dims, dtype=storage(p.dtype))
        written = [p for p in params if isinstance(p, Tensor) and p.writes]
        if not written:
            raise ExportError("a test needs at least one tensor the kernel writes (access 'write' or 'read_write')")
        inputs = {p.name: arrays[p.name].copy() for p in params if isinstance(p, Tensor) and p.reads}
        expected = _run_reference(np, kind, reference, params, arrays, ints, floats, written, dims_of)
        label = f"{stem}.test{index}.{shape.name}"
        table = {"shape": shape.name, "values": {k: v for k, v in {**ints, **floats}.items() if k not in shape.values},
                 "inputs": {}, "outputs": {}}
        for name, array in inputs.items():
            table["inputs"][name] = f"{label}.{name}.npy"
            files[table["inputs"][name]] = npy_bytes(np, array)
        for p in written:
            table["outputs"][p.name] = f"{label}.{p.name}.expected.npy"
            files[table["outputs"][p.name]] = npy_bytes(np, expected[p.name])
        if test.tolerance:
            table["tolerance"] = dict(test.tolerance)
        tables.append(table)
    return tables, files


def _run_reference(np, kind, reference, params, arrays, ints, floats, written, dims_of):
    """Calls the reference with the call's arguments in order (tensors as `kind`, scalars as
    Python numbers); its outputs are what it wrote into the written tensors, or what it returned
    (one value, or a tuple in the order of the written tensors)."""
    dtype_of = {p.name: p.dtype for p in params if isinstance(p, Tensor)}
    if kind == "torch":
        import torch

        def to_torch(name, array):  # bf16 and fp8 as tensors of that dtype, bit for bit
            if not narrow.is_raw(dtype_of[name]):
                return torch.from_numpy(array.copy())
            bits = array.view(np.int16) if dtype_of[name] == "bf16" else array
            return torch.from_numpy(bits.copy()).view(getattr(torch, DTYPES[dtype_of[name]][2]))
        objects = {name: to_torch(name, array) for name, array in arrays.items()}
    else:  # NumPy has no bf16 or fp8: the reference gets float32 arrays of the exact values
        objects = {name: narrow.decode(np, array, dtype_of[name]).astype(np.float32) if narrow.is_raw(dtype_of[name])
                   else array.copy() for name, array in arrays.items()}
    args = [objects[p.name] if isinstance(p, Tensor) else ints.get(p.name, floats.get(p.name)) for p in params]
    try:
        result = reference(*args)
    except Exception as e:
        raise ExportError(f"the reference failed: {type(e).__name__}: {e}") from e
    if result is not None:
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != len(written):
            raise ExportError(f"the reference returned {len(results)} values for the {len(written)} written tensors "
                              f"({', '.join(p.name for p in written)})")
        return {p.name: _as_numpy(np, r, p, dims_of[p.name]) for p, r in zip(written, results)}
    return {p.name: _as_numpy(np, objects[p.name], p, dims_of[p.name]) for p in written}
