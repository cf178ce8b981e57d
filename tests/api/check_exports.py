#!/usr/bin/env python3
"""The dynamic symbols libkiln exports must be exactly the functions kiln.h declares, each
under the version node of the linker script."""
import re
import subprocess
import sys

header, library = sys.argv[1], sys.argv[2]
text = open(header).read()
declared = set(re.findall(r"KILN_API\s+[^;(]*?\b(kiln_\w+)\s*\(", text, re.S))
out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
exported, unversioned = set(), []
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3 or parts[1] not in "TtWwDdBbRr":
        continue
    name, _, version = parts[2].partition("@@")
    if name.startswith("KILN_"):
        continue  # the version node itself
    exported.add(name)
    if not version.startswith("KILN_"):
        unversioned.append(name)
missing, extra = sorted(declared - exported), sorted(exported - declared)
for name in missing:
    print("declared in kiln.h but not exported:", name)
for name in extra:
    print("exported but not declared in kiln.h:", name)
for name in unversioned:
    print("exported without a KILN_ version:", name)
print(f"{len(declared)} functions declared, {len(exported)} exported")
sys.exit(1 if missing or extra or unversioned or not declared else 0)
