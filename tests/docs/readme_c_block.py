#!/usr/bin/env python3
"""The C program README.md shows under "Embedding libkiln" must be examples/c/matmul_routes.c,
byte for byte, so that what a reader copies is what the test suite builds and runs
(tests/install/check_install.sh). usage: readme_c_block.py README.md FILE.c"""
import re
import sys

readme, source = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
section = text.split("## Embedding libkiln", 1)
if len(section) != 2:
    sys.exit(f"{readme}: no '## Embedding libkiln' section")
block = re.search(r"^```c\n(.*?)^```$", section[1], re.S | re.M)
if not block:
    sys.exit(f"{readme}: no ```c block under '## Embedding libkiln'")
wanted = open(source, encoding="utf-8").read()
if block.group(1) != wanted:
    line = text[: text.index(block.group(1))].count("\n") + 1
    ours, theirs = block.group(1).splitlines(), wanted.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    sys.exit(f"{readme}:{line + first}: the C block differs from {source} at its line {first + 1}; "
             "copy one onto the other")
print(f"{readme}: the C block under 'Embedding libkiln' is {source} ({len(wanted.splitlines())} lines)")
