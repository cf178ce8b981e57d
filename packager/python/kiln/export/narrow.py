"""bf16 and fp8 arrays for test vectors: NumPy has no dtype for them, so kiln's vectors hold their
raw bits (<u2 for bf16, |u1 for f8e4m3 and f8e5m2; schema/MANIFEST.md). Encoding rounds to the
nearest value of the type, ties to the even code, as kiln.narrow_float_bits does for one scalar; a
value past the type's largest finite one is refused rather than turned into infinity or NaN."""
from .errors import ExportError

# kiln dtype -> (exponent bits, mantissa bits, IEEE-like: the all-ones exponent holds inf/NaN;
# else, E4M3, only S.1111.111 is NaN), and the NumPy dtype holding the raw bits.
FORMATS = {"bf16": (8, 7, True, "<u2"), "f8e4m3": (4, 3, False, "u1"), "f8e5m2": (5, 2, True, "u1")}
_tables = {}


def is_raw(dtype):
    return dtype in FORMATS


def raw_dtype(dtype):
    return FORMATS[dtype][3]


def _table(np, dtype):
    """(value of every code, the finite non-negative values in code order, sign bit)."""
    if dtype not in _tables:
        exponent, mantissa, ieee, _ = FORMATS[dtype]
        bits = 1 + exponent + mantissa
        codes = np.arange(1 << bits, dtype=np.int64)
        field = (codes >> mantissa) & ((1 << exponent) - 1)
        man = codes & ((1 << mantissa) - 1)
        bias = (1 << (exponent - 1)) - 1
        normal = (1.0 + man / (1 << mantissa)) * np.exp2((field - bias).astype(np.float64))
        sub = man * 2.0 ** (1 - bias - mantissa)
        values = np.where(field == 0, sub, normal)
        top = (1 << exponent) - 1
        special = (field == top) if ieee else ((field == top) & (man == (1 << mantissa) - 1))
        values = np.where(special, np.where((man == 0) & ieee, np.inf, np.nan), values)
        sign = 1 << (bits - 1)
        values = np.where(codes & sign, -values, values)
        positives = values[:sign]
        positives = positives[np.isfinite(positives)]  # ascending with the code: 0, subnormals, normals
        _tables[dtype] = (values, positives, sign)
    return _tables[dtype]


def decode(np, raw, dtype):
    """float64 values of raw bits."""
    values, _, _ = _table(np, dtype)
    return values[np.asarray(raw).astype(np.int64)]


def encode(np, values, dtype, what):
    """Raw bits of `values` rounded to nearest even in `dtype`; ExportError naming `what` where a
    value is not finite there."""
    _, positives, sign = _table(np, dtype)
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ExportError(f"{what}: holds NaN or infinite values, which a {dtype} test vector does not carry")
    a = np.abs(x)
    top = len(positives) - 1
    hi = np.minimum(np.searchsorted(positives, a, side="left"), top)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - positives[lo], positives[hi] - a
    code = np.where(d_hi < d_lo, hi, np.where(d_lo < d_hi, lo, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a == positives[hi], hi, code)
    # Past the largest finite value: within half a step it rounds down to it (a tie to the even
    # code only), beyond it would be infinity or NaN.
    step = positives[top] - positives[top - 1]
    over = (a > positives[top] + step / 2) | ((a == positives[top] + step / 2) & (top % 2 == 1))
    if np.any(over):
        raise ExportError(f"{what}: {x[over].flat[0]} is outside the {dtype} range (largest finite "
                          f"{positives[top]})")
    code = np.where(a > positives[top], top, code)
    code = code | np.where(np.signbit(x), sign, 0)
    return code.astype(raw_dtype(dtype))
