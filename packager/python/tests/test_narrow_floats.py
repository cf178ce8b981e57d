"""f16, bf16 and fp8 scalars from Python: every code of each format round-trips through
kiln.narrow_float_bits against a decoder written here from the formats' definitions, halves round
to even, out-of-range values are refused; and a kernel taking such scalars receives their bits."""
import math
import subprocess

import pytest

import kiln
from test_export import kiln_cli

# kiln_dtype -> (name, exponent bits, mantissa bits, IEEE-like)
FORMATS = {9: ("f16", 5, 10, True), 10: ("bf16", 8, 7, True), 13: ("f8e4m3", 4, 3, False), 14: ("f8e5m2", 5, 2, True)}


def decode(dtype, code):
    _, e_bits, m_bits, ieee = FORMATS[dtype]
    sign = -1.0 if code >> (e_bits + m_bits) & 1 else 1.0
    field, man = code >> m_bits & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    if field == (1 << e_bits) - 1 and (ieee or man == (1 << m_bits) - 1):
        return math.nan if (man or not ieee) else sign * math.inf
    if field == 0:
        return sign * man * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + man / (1 << m_bits)) * 2.0 ** (field - bias)


@pytest.mark.parametrize("dtype", sorted(FORMATS))
def test_every_finite_code_round_trips(dtype):
    _, e_bits, m_bits, _ = FORMATS[dtype]
    for code in range(1 << (1 + e_bits + m_bits)):
        value = decode(dtype, code)
        if math.isfinite(value):
            assert kiln.narrow_float_bits(dtype, value) == code, (FORMATS[dtype][0], hex(code), value)
        else:
            with pytest.raises(ValueError):
                kiln.narrow_float_bits(dtype, value)


def test_halves_round_to_even_and_overflow_is_refused():
    assert kiln.narrow_float_bits(13, 1.0625) == 0x38 and kiln.narrow_float_bits(13, 1.1875) == 0x3A
    assert kiln.narrow_float_bits(13, 464.0) == 0x7E  # halfway to E4M3's NaN code: to even, 448
    assert kiln.narrow_float_bits(10, 1 + 2 ** -8) == 0x3F80 and kiln.narrow_float_bits(13, -0.0) == 0x80
    for dtype, value in ((13, 470.0), (14, 61440.0), (9, 65520.0), (10, math.inf)):
        with pytest.raises(ValueError):
            kiln.narrow_float_bits(dtype, value)


PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry scale(
\t.param .u64 scale_param_0,
\t.param .b16 scale_param_1,
\t.param .b16 scale_param_2,
\t.param .b8 scale_param_3,
\t.param .u32 scale_param_4
)
{
\tret;
}
"""

MANIFEST = """[package]
name = "narrow"
kernel_revision = "r1"
sequence = 1

[[kernel]]
name = "scale"
entry = "scale"
backend = "cuda"
params = [{ name = "x", type = "ptr", dtype = "f8e4m3" }, { name = "h", type = "f16" }, { name = "b", type = "bf16" },
          { name = "e", type = "f8e4m3" }, { name = "n", type = "u32" }]
code = [{ arch = "compute_90", file = "scale.ptx" }]
"""


@pytest.fixture(scope="module")
def narrow_archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("narrow")
    (root / "scale.ptx").write_text(PTX)
    (root / "kiln.toml").write_text(MANIFEST)
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(root / "k")], check=True, capture_output=True)
    subprocess.run([cli, "pack", str(root / "kiln.toml"), "--key", str(root / "k.key"), "-o", str(root / "a.kiln"), "-q"],
                   check=True, capture_output=True)
    return root


def test_a_kernel_receives_the_bits_of_its_narrow_float_scalars(narrow_archive):
    rt = kiln.Runtime(trust=str(narrow_archive / "k.pub"))
    seen = []
    rt.register_reference("scale", lambda x, h, b, e, n, info: seen.append((h, b, e, n)))
    kernel = rt.open(str(narrow_archive / "a.kiln")).kernel("scale")
    assert [p["dtype"] for p in kernel.params] == [13, 9, 10, 13, 7]
    assert [p["type"] for p in kernel.params] == ["f8e4m3", "f16", "bf16", "f8e4m3", "u32"]  # the manifest's names
    kernel(0, 1.0, -3.0, 448, 4)
    assert seen == [(1.0, -3.0, 448, 4)], "the reference gets the call's own values"
    assert [s.value for s in kernel._slots[1:4]] == [0x3C00, 0xC040, 0x7E], "libkiln gets the types' bits"
    with pytest.raises(kiln.KilnError, match="argument 'e' is float8_e4m3fn: 1000.0 is outside the float8_e4m3fn range"):
        kernel(0, 1.0, 1.0, 1000.0, 4)
    with pytest.raises(TypeError, match="argument 'b' is bfloat16: pass a Python int or float, not str"):
        kernel(0, 1.0, "1", 1.0, 4)
