#!/usr/bin/env python3
"""libkiln's ABI against the checked-in v1 baseline, with libabigail's abidiff.

    check_abi.py check     ABIDIFF BASELINE LIBKILN HEADERS_DIR   any difference fails
    check_abi.py self-test ABIDIFF BASELINE LIBKILN HEADERS_DIR   a baseline missing one
                                                                 function must be caught
    check_abi.py update    ABIDW   BASELINE LIBKILN HEADERS_DIR   rewrite the baseline
    check_abi.py compatible ABIDIFF OLD_BASELINE LIBKILN HEADERS_DIR an older release's callers are
                                                                 unaffected: nothing removed or
                                                                 changed, only functions added
                                                                 under a newer version node

Any difference fails, additions included: a new function belongs in a new version node of
runtime/api/kiln.map, and the baseline is then regenerated on purpose (update) in the same commit.
The baseline holds what the public header declares (abidw --headers-dir --drop-private-types).
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

# Only the exported functions and the types they reach. The baseline carries no source
# locations (they differ per checkout), so abidiff's --headers-dir filtering, which decides
# by location, cannot be used; the version script already exports kiln_* and nothing else.
FLAGS = ["--exported-interfaces-only"]

# Structs whose first field is the size the caller compiled them with (kiln.h): libkiln reads only
# the fields that size covers, so a field appended at the end is a compatible change for them.
SIZE_VERSIONED = {"kiln_runtime_options", "kiln_stats", "kiln_param_info", "kiln_call_info"}


def only_appended_fields(out):
    """True when every change abidiff reports is a size-versioned struct growing at its end: its
    size changed, and each inserted member lies at or beyond the old size. abidiff prints each
    change under the function that reaches the type, so a struct may appear more than once."""
    structs = re.findall(r"underlying type 'struct (\w+)' changed:", out)
    if not structs or any(name not in SIZE_VERSIONED for name in structs):
        return False
    sizes = re.findall(r"type size changed from (\d+) to (\d+) \(in bits\)", out)
    if len(sizes) != len(structs):
        return False
    old_size = min(int(a) for a, _ in sizes)
    offsets = [int(o) for o in re.findall(r"', at offset (\d+) \(in bits\)", out)]
    allowed = re.compile(r"(\[C\] 'function|parameter \d+ of type|in pointed to type|in unqualified underlying type|"
                         r"underlying type 'struct|type size changed|\d+ data member insertions?:|"
                         r"'.*', at offset \d+ \(in bits\)|with some indirect sub-type change)")
    changed = out[out.find("with some indirect sub-type change"):]
    for line in changed.splitlines():
        if line.strip() and not allowed.search(line):
            return False
    return bool(offsets) and all(o >= old_size for o in offsets)


def abidiff(tool, baseline, lib, headers):
    return subprocess.run([tool, *FLAGS, baseline, lib],
                          capture_output=True, text=True)


def check(tool, baseline, lib, headers):
    r = abidiff(tool, baseline, lib, headers)
    if r.returncode == 0:
        print(f"ABI of {lib} equals the baseline {baseline}")
        return 0
    print(r.stdout + r.stderr)
    print(f"ABI of {lib} differs from {baseline} (abidiff exit {r.returncode}). If the change "
          f"is intended and compatible, put new functions in a new version node of runtime/api/kiln.map "
          f"and regenerate the baseline: {sys.argv[0]} update abidw {baseline} {lib} {headers}")
    return 1


def self_test(tool, baseline, lib, headers):
    """Drops kiln_version from a copy of the baseline: abidiff must report it as added."""
    text = open(baseline, encoding="utf-8").read()
    pruned = re.sub(r"\s*<elf-symbol name='kiln_version' [^>]*/>", "", text)
    pruned = re.sub(r"\s*<function-decl name='kiln_version' .*?</function-decl>", "", pruned,
                    flags=re.S)
    if pruned == text:
        print("self-test: kiln_version not found in the baseline; the baseline is not libkiln's")
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".abi", delete=False) as f:
        f.write(pruned)
    try:
        r = abidiff(tool, f.name, lib, headers)
    finally:
        os.unlink(f.name)
    if r.returncode != 0 and "kiln_version" in r.stdout:
        print(f"self-test: abidiff caught the missing function (exit {r.returncode})")
        return 0
    print(r.stdout + r.stderr)
    print(f"self-test: abidiff did not report kiln_version (exit {r.returncode})")
    return 1


# abidiff's report of a struct grown by one field at `offset`: the rule's own test cases.
GROWN = """1 function with some indirect sub-type change:

  [C] 'function kiln_status kiln_runtime_create(kiln_runtime**, const {name}*)' at kiln_api.cpp:82:1 has some indirect sub-type changes:
    parameter 2 of type 'const {name}*' has sub-type changes:
      in pointed to type 'const {name}':
        in unqualified underlying type 'typedef {name}' at kiln.h:151:1:
          underlying type 'struct {name}' changed:
            type size changed from 704 to 768 (in bits)
            1 data member insertion:
              'const char* added', at offset {offset} (in bits) at kiln.h:145:1
"""


def growth_rule_holds():
    """The appended-field rule accepts a field at the end of a size-versioned struct and refuses
    one inserted before its old end, or any growth of another struct."""
    return (only_appended_fields(GROWN.format(name="kiln_runtime_options", offset=704))
            and not only_appended_fields(GROWN.format(name="kiln_runtime_options", offset=640))
            and not only_appended_fields(GROWN.format(name="kiln_kernel_info", offset=704)))


def compatible(tool, baseline, lib, headers):
    if not growth_rule_holds():
        print("check_abi.py: the appended-field rule accepts a change it must refuse (or refuses the one it must accept)")
        return 1
    r = abidiff(tool, baseline, lib, headers)
    out = r.stdout
    if r.returncode == 0:
        print(f"ABI of {lib} equals the older baseline {baseline}")
        return 0
    functions = re.search(r"Functions changes summary: (\d+) Removed, (\d+) Changed", out)
    variables = re.search(r"Variables changes summary: (\d+) Removed, (\d+) Changed", out)
    added = re.findall(r"\[A\] 'function [^']*'\s*{(\w+)@@(KILN_[A-Z0-9.]+)\}", out)
    old_nodes = set(re.findall(r"version='(KILN_[0-9.]+)'", open(baseline, encoding="utf-8").read()))
    broken = []
    if r.returncode & 8:
        broken.append("abidiff reports an incompatible change")
    grown = functions and functions.group(1) == "0" and only_appended_fields(out)
    if not functions or (functions.groups() != ("0", "0") and not grown) or (variables and variables.groups() != ("0", "0")):
        broken.append("functions or variables were removed or changed (beyond fields appended to a size-versioned struct)")
    for name, node in added:
        if node in old_nodes:
            broken.append(f"{name} was added under {node}, a version node the older release already had")
    print(out + r.stderr)
    if broken:
        print(f"{lib} breaks callers of {baseline}: " + "; ".join(broken))
        return 1
    print(f"{lib} keeps every function of {baseline} unchanged{' (a size-versioned struct grew at its end)' if grown else ''} "
          f"and adds {len(added)} under new version nodes")
    return 0


def update(tool, baseline, lib, headers):
    subprocess.run([tool, "--headers-dir", headers, "--drop-private-types", *FLAGS, "--no-corpus-path", "--no-show-locs",
                    "--no-comp-dir-path", "--out-file", baseline, lib], check=True)
    # Source paths of this checkout mean nothing elsewhere: keep them repository-relative.
    root = os.path.dirname(os.path.dirname(os.path.abspath(headers))) + "/"
    text = open(baseline, encoding="utf-8").read().replace(root, "")
    open(baseline, "w", encoding="utf-8").write(text)
    print(f"wrote {baseline}")
    return 0


def has_debug_info(lib):
    """Whether the ELF file has a .debug_info section (little-endian ELF64, as libkiln is)."""
    with open(lib, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return False
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_offset = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        name = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\0", names_offset + name)
        if data[names_offset + name:end] == b".debug_info":
            return True
    return False


# Without DWARF abidiff compares only the ELF symbols and reports a library whose structs or
# function types changed as equal: such a run proves nothing, so it says so and exits 77
# (ctest's SKIP_RETURN_CODE for these tests) instead of passing.
NO_DEBUG_INFO = 77

if __name__ == "__main__":
    modes = {"check": check, "self-test": self_test, "update": update, "compatible": compatible}
    if len(sys.argv) != 6 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    if not has_debug_info(sys.argv[4]):
        print(f"{sys.argv[4]} has no DWARF (.debug_info): abidiff would compare symbols only and miss "
              f"changed types, so the ABI is not checked (libkiln is built with -g in every build type: "
              f"runtime/CMakeLists.txt)")
        sys.exit(NO_DEBUG_INFO)
    sys.exit(modes[sys.argv[1]](*sys.argv[2:]))
