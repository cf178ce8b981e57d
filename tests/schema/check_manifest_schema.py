#!/usr/bin/env python3
"""Checks schema/kiln.schema.json against manifests: the examples must validate, and each
broken variant must not. Keeps the editor schema and the C++ parser telling the same story."""
import json
import pathlib
import sys
import tomllib

import jsonschema

root = pathlib.Path(__file__).resolve().parents[2]
schema = json.loads((root / "schema" / "kiln.schema.json").read_text())
jsonschema.Draft7Validator.check_schema(schema)
validator = jsonschema.Draft7Validator(schema)

failures = []
examples = sorted(root.glob("examples/**/kiln.toml"))
if not examples:
    failures.append("no example manifests found")
for path in examples:
    errors = list(validator.iter_errors(tomllib.loads(path.read_text())))
    if errors:
        failures.append(f"{path}: valid manifest refused by the schema: {errors[0].message}")

base = tomllib.loads((root / "examples" / "cuda_matmul_relu" / "kiln.toml").read_text())

def broken(name, mutate):
    doc = json.loads(json.dumps(base))
    mutate(doc)
    if validator.is_valid(doc):
        failures.append(f"schema accepted a broken manifest: {name}")

broken("sequence as string", lambda d: d["package"].__setitem__("sequence", "1"))
broken("unknown package key", lambda d: d["package"].__setitem__("sequnce", 1))
broken("path with ..", lambda d: d["kernel"][0].__setitem__("sources", ["../x.cu"]))
broken("absolute path", lambda d: d["kernel"][0].__setitem__("sources", ["/x.cu"]))
broken("backend metal", lambda d: d["kernel"][0].__setitem__("backend", "metal"))
broken("ptr without dtype", lambda d: d["kernel"][0]["params"][0].pop("dtype"))
broken("grid of zero", lambda d: d["kernel"][0]["shape"][0].__setitem__("grid", [0]))
broken("no code", lambda d: d["kernel"][0].__setitem__("code", []))
broken("uppercase package", lambda d: d["package"].__setitem__("name", "Matmul"))
broken("range of one bound", lambda d: d["kernel"][0]["shape"][0].__setitem__("ranges", {"m": [1]}))
broken("where not a string", lambda d: d["kernel"][0]["shape"][0].__setitem__("where", [1]))
broken("expression too long", lambda d: d["kernel"][0]["shape"][0].__setitem__("grid", ["m" * 257]))

# A range shape, as MANIFEST.md shows it, must validate.
ranged = json.loads(json.dumps(base))
ranged["kernel"][0]["shape"].append({"name": "any_m", "ranges": {"m": [1, 8192]}, "values": {"n": 4096},
                                     "where": ["m % 16 == 0"], "grid": ["cdiv(n, 128)", "cdiv(m, 128)", 1],
                                     "block": [256, 1, 1], "shared_mem": "min(65536, 1024 * cdiv(n, 64))"})
ranged["kernel"][0].setdefault("test", []).append({"shape": "any_m", "values": {"m": 32}, "outputs": {"c": "c.npy"}})
for e in validator.iter_errors(ranged):
    failures.append(f"range shape refused by the schema: {e.message}")

for f in failures:
    print("FAIL:", f)
print(f"{len(examples)} example manifest(s) checked, {12 - sum('broken' in f for f in failures)}/12 broken variants refused")
sys.exit(1 if failures else 0)
