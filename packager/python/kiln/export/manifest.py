"""Writes kiln.toml (schema/MANIFEST.md) from what an exporter derived: one package, one kernel.
Every exporter goes through here, so the files they write read the same way."""
import json
import math
import pathlib

from .errors import ExportError


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ExportError(f"{v} cannot be written in kiln.toml")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise ExportError(f"cannot write {type(v).__name__} {v!r} in kiln.toml")


def _key(k):
    k = str(k)
    return k if k and all(c.isalnum() or c in "_-" for c in k) and k.isascii() else json.dumps(k)


_SHAPE_KEYS = ("name", "values", "ranges", "where", "grid", "block", "shared_mem", "cluster")
_TEST_KEYS = ("shape", "values", "inputs", "outputs", "tolerance")


def render(*, package, revision, sequence, description, toolchain, extra_files, kernel, generator):
    """The text of kiln.toml. `kernel` holds name, entry, backend, sources, ir, params,
    kernel_args (None: the kernel takes params as they are), code, tolerance, variants, shapes and tests."""
    lines = [f"# Written by {generator}.", "[package]", f"name = {toml_value(package)}",
             f"kernel_revision = {toml_value(revision)}", f"sequence = {int(sequence)}"]
    if description:
        lines.append(f"description = {toml_value(description)}")
    lines += ["", "[toolchain]"]
    lines += [f"{_key(k)} = {toml_value(str(v))}" for k, v in toolchain.items() if v is not None]
    if extra_files:
        lines += ["", "[files]", f"extra = {toml_value(list(extra_files))}"]
    k = kernel
    lines += ["", "[[kernel]]", f"name = {toml_value(k['name'])}", f"entry = {toml_value(k['entry'])}",
              f"backend = {toml_value(k.get('backend', 'cuda'))}"]
    for key in ("sources", "ir"):
        if k.get(key):
            lines.append(f"{key} = {toml_value(k[key])}")
    lines.append("params = [")
    lines += [f"  {toml_value(p)}," for p in k["params"]]
    lines.append("]")
    if k.get("kernel_args") is not None:
        lines += _array("kernel_args", k["kernel_args"])
    lines += _array("code", k["code"])
    if k.get("tolerance"):
        lines.append(f"tolerance = {toml_value(k['tolerance'])}")
    for v in k.get("variants", []):
        lines += ["", "[[kernel.variant]]", f"name = {toml_value(v['name'])}", f"when = {toml_value(v['when'])}"]
        lines += _array("code", v["code"])
        if v.get("kernel_args") is not None:
            lines += _array("kernel_args", v["kernel_args"])
    for s in k.get("shapes", []):
        lines += ["", "[[kernel.shape]]"]
        lines += [f"{key} = {toml_value(s[key])}" for key in _SHAPE_KEYS if s.get(key) not in (None, {}, [])]
    for t in k.get("tests", []):
        lines += ["", "[[kernel.test]]"]
        lines += [f"{key} = {toml_value(t[key])}" for key in _TEST_KEYS if t.get(key) not in (None, {})]
    return "\n".join(lines) + "\n"


def _array(key, items):
    """`key = [` with one inline table or value per line, `]`."""
    return [f"{key} = ["] + [f"  {toml_value(x)}," for x in items] + ["]"]


def write_files(out, files):
    """Writes {relative name: bytes or str} into the folder `out`."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data if isinstance(data, bytes) else data.encode())
