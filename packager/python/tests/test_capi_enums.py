"""kiln/_capi.py's enums against include/kiln/kiln.h, parsed here: the same members, names and
values, so that a status, route or dtype added to the header and not to the bindings fails here
rather than surfacing as a bare number in a user's error."""
import os
import re

import pytest

from kiln import _capi

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "include", "kiln", "kiln.h")


def header_enum(name):
    """{member: value} of `typedef enum NAME { ... } NAME;` in kiln.h; a member without `= value`
    takes the one after the previous member's, as in C."""
    with open(HEADER) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    body = re.search(r"typedef\s+enum\s+" + name + r"\s*\{(.*?)\}\s*" + name + r"\s*;", text, re.S)
    assert body, f"no enum {name} in {HEADER}"
    members, value = {}, -1
    for item in body.group(1).split(","):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"([A-Z0-9_]+)\s*(?:=\s*(\d+))?", item)
        assert m, f"{name}: member {item!r} is not NAME or NAME = number"
        value = int(m.group(2)) if m.group(2) is not None else value + 1
        members[m.group(1)] = value
    return members


@pytest.mark.parametrize("c_name, py_enum, prefix", [
    ("kiln_status", _capi.Status, r"KILN_(?:ERR_)?"),
    ("kiln_route", _capi.Route, r"KILN_ROUTE_"),
    ("kiln_dtype", _capi.Dtype, r"KILN_DTYPE_"),
])
def test_python_enum_is_the_header_enum(c_name, py_enum, prefix):
    expected = {re.sub("^" + prefix, "", k): v for k, v in header_enum(c_name).items()}
    assert {m.name: int(m) for m in py_enum} == expected


def test_every_status_and_route_has_its_words():
    assert set(_capi.STATUS_TEXT) == set(_capi.Status)
    assert set(_capi.ROUTE_WORDS) == set(_capi.Route)


def test_every_dtype_has_its_tables():
    assert set(_capi.DTYPES) == set(_capi.DTYPE_NAMES) == set(_capi.Dtype)
    assert set(_capi.INT_BOUNDS) | set(_capi.NARROW_FLOATS) | {_capi.Dtype.F32, _capi.Dtype.F64} == set(_capi.Dtype)


def test_kiln_error_carries_a_status_and_says_its_words():
    import kiln
    e = kiln.KilnError(2, "missing.kiln")
    assert e.status is kiln.Status.IO and str(e) == "I/O error: missing.kiln"
    # A value a newer libkiln may return: kept as the number, never lost.
    e = kiln.KilnError(999, "what")
    assert e.status == 999 and str(e) == "status 999: what"
