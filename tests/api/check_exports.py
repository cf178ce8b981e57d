#!/usr/bin/env python3
"""The dynamic symbols libkiln exports must be exactly the functions its public headers declare:
kiln.h's each under a release's version node (KILN_0.x), kiln_experimental.h's (kiln_x_*) under
KILN_EXPERIMENTAL, which promises no stability.

    check_exports.py LIBKILN HEADER...
"""
import re
import subprocess
import sys

library, headers = sys.argv[1], sys.argv[2:]
declared = set()
for header in headers:
    declared |= set(re.findall(r"KILN_API\s+[^;(]*?\b(kiln_\w+)\s*\(", open(header).read(), re.S))
out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
exported, misversioned = set(), []
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3 or parts[1] not in "TtWwDdBbRr":
        continue
    name, _, version = parts[2].partition("@@")
    if name.startswith("KILN_"):
        continue  # the version node itself
    exported.add(name)
    experimental = name.startswith("kiln_x_")
    if experimental != (version == "KILN_EXPERIMENTAL") or not version.startswith("KILN_"):
        misversioned.append(f"{name}@@{version or '(none)'}")
missing, extra = sorted(declared - exported), sorted(exported - declared)
for name in missing:
    print("declared in a header but not exported:", name)
for name in extra:
    print("exported but declared in no header:", name)
for name in misversioned:
    print("exported under the wrong version node (kiln_x_* under KILN_EXPERIMENTAL, the rest under KILN_0.x):", name)
print(f"{len(declared)} functions declared, {len(exported)} exported")
sys.exit(1 if missing or extra or misversioned or not declared else 0)
