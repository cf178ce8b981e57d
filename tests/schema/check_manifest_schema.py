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
# The examples, and the test manifests that use what the examples do not (variants, addr()).
examples = sorted(root.glob("examples/**/kiln.toml")) + sorted(root.glob("tests/data/scale/kiln*.toml"))
if not examples:
    failures.append("no example manifests found")
for path in examples:
    errors = list(validator.iter_errors(tomllib.loads(path.read_text())))
    if errors:
        failures.append(f"{path}: valid manifest refused by the schema: {errors[0].message}")

base = tomllib.loads((root / "examples" / "cuda_matmul_relu" / "kiln.toml").read_text())

variants = 0


def broken(name, mutate, manifest=None):
    global variants
    variants += 1
    doc = json.loads(json.dumps(manifest or base))
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

# kernel_args and cluster (MANIFEST.md "kernel_args"): the TMA example's manifest, broken.
tma = tomllib.loads((root / "examples" / "cuda_tma_cluster" / "kiln.toml").read_text())
tensor_map = lambda d: d["kernel"][0]["kernel_args"][0]["tensor_map"]
args = lambda d: d["kernel"][0]["kernel_args"]
broken("empty kernel_args", lambda d: d["kernel"][0].__setitem__("kernel_args", []), tma)
broken("kernel_args entry not an identifier", lambda d: args(d).append("1x"), tma)
broken("tensor_map and scratch in one entry", lambda d: args(d)[0].__setitem__("scratch", {"bytes": 1}), tma)
broken("value without type", lambda d: args(d).append({"name": "v", "value": "rows"}), tma)
broken("value of a float type", lambda d: args(d).append({"name": "v", "type": "f32", "value": 1}), tma)
broken("unknown tensor_map key", lambda d: tensor_map(d).__setitem__("swizle", "128B"), tma)
broken("swizzle 256B", lambda d: tensor_map(d).__setitem__("swizzle", "256B"), tma)
broken("rank-2 tensor map without strides", lambda d: tensor_map(d).pop("strides"), tma)
broken("box over 256", lambda d: tensor_map(d).__setitem__("box", [512, 32]), tma)
broken("stride not a multiple of 16", lambda d: tensor_map(d).__setitem__("strides", [8]), tma)
broken("scratch align not a power of two", lambda d: args(d).append({"name": "s", "scratch": {"bytes": 1, "align": 3}}), tma)
broken("scratch per block", lambda d: args(d).append({"name": "s", "scratch": {"bytes": 1, "per": "block"}}), tma)
broken("cluster of four dimensions", lambda d: d["kernel"][0]["shape"][0].__setitem__("cluster", [2, 1, 1, 1]), tma)
broken("cluster over 8", lambda d: d["kernel"][0]["shape"][0].__setitem__("cluster", [16]), tma)
# Every form MANIFEST.md gives, with every default spelled out, must validate.
full = json.loads(json.dumps(tma))
full["kernel"][0]["kernel_args"] += [
    {"name": "in"}, {"name": "lda", "type": "i64", "value": "cols * 4"}, {"name": "one", "type": "u8", "value": 1},
    {"name": "ws", "scratch": {"bytes": "4 * rows", "align": 256, "per": "launch"}}, {"name": "ws2", "scratch": {"bytes": 0}}]
full["kernel"][0]["kernel_args"][0]["tensor_map"].update(
    dtype="f32", element_strides=[1, 1], interleave="none", swizzle="128B", l2_promotion="256B", oob_fill="nan")
full["kernel"][0]["shape"][0]["cluster"] = [2]
for e in validator.iter_errors(full):
    failures.append(f"kernel_args forms refused by the schema: {e.message}")

for f in failures:
    print("FAIL:", f)
print(f"{len(examples)} example manifest(s) checked, "
      f"{variants - sum('broken' in f for f in failures)}/{variants} broken variants refused")
sys.exit(1 if failures else 0)
