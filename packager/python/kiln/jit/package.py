"""A capture folder (recorder.py's layout) into an ordinary kiln package folder: kiln.toml, and
capture.json, the index a served boot reads (after verification) to answer Triton's lookups.

Each Triton kernel specialisation becomes one [[kernel]] whose code object is its cubin, so
`kiln inspect`, `kiln preflight --target`, `kiln verify` and the store see it like any other; its
IR stages are its `ir`; its metadata, Triton's group file, host modules, autotune results and
torch.compile's artifacts are `[files] extra`. Nothing is renamed: members keep Triton's file names
under triton/<KEY>/, so what is served is byte for byte what Triton wrote.
"""
import datetime
import glob
import json
import os
import re
import sysconfig

from ..export.manifest import toml_value

FORMAT = "kiln-jit-capture/1"
_IR_SUFFIXES = (".ptx", ".ttir", ".ttgir", ".llir", ".source")


class CaptureError(Exception):
    """A capture folder that cannot become a package: says what and where."""


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise CaptureError(f"{path}: cannot be read as JSON ({e})") from None


def _arch_tag(capability):
    """Triton's own naming (sm_arch_from_capability): 'a' targets from cc 9.0 on."""
    return f"sm_{capability}{'a' if capability >= 90 else ''}"


def _kernel_name(triton_name, key, taken):
    base = re.sub(r"[^A-Za-z0-9_]", "_", triton_name)[:96] or "kernel"
    if not re.match(r"[A-Za-z_]", base):
        base = "k_" + base
    for length in (12, 20, 52):
        name = f"{base}__{key[:length].lower()}"
        if name not in taken:
            return name
    raise CaptureError(f"two captured entries share key {key}")


def scan(root):
    """Reads the capture folder: {"kernels": [...], "modules": [...], "autotune": [...],
    "skipped": [...], "pins": {...}, "torch": [...]}. Raises CaptureError naming a bad file."""
    keys = {}
    for path in glob.glob(os.path.join(root, "keys", "*.json")):
        keys[os.path.basename(path)[:-5]] = _read_json(path)
    pins = {}
    for path in sorted(glob.glob(os.path.join(root, "keys", "*.pins"))):
        pins.update(_read_json(path))
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    found = {"kernels": [], "modules": [], "autotune": [], "skipped": [], "pins": {"ptxas": pins},
             "torch": sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "torch", "*.bin")))}
    taken = set()
    for folder in sorted(glob.glob(os.path.join(root, "triton", "*"))):
        key = os.path.basename(folder)
        files = sorted(f for f in os.listdir(folder) if not f.startswith(".tmp-"))
        member = lambda f: f"triton/{key}/{f}"  # noqa: E731
        groups = [f for f in files if f.startswith("__grp__")]
        if groups:
            group_file = groups[0]
            children = _read_json(os.path.join(folder, group_file)).get("child_paths", {})
            missing = [c for c in children if c not in files]
            meta_name = group_file[len("__grp__"):]
            if missing or meta_name not in children:
                found["skipped"].append({"key": key, "why": f"incomplete entry (missing {missing or meta_name})"})
                continue
            meta = _read_json(os.path.join(folder, meta_name))
            target = meta.get("target") or {}
            if isinstance(target, list):  # older metadata: [backend, arch, warp_size]
                target = {"backend": target[0], "arch": target[1], "warp_size": target[2]}
            cubins = [c for c in children if c.endswith(".cubin")]
            if target.get("backend") != "cuda" or not cubins:
                found["skipped"].append({"key": key, "why": f"not a CUDA cubin entry (target {target}); "
                                                           "only NVIDIA targets are captured"})
                continue
            name = _kernel_name(meta.get("name", "kernel"), key, taken)
            taken.add(name)
            found["kernels"].append({
                "key": key, "kernel": name, "entry": meta["name"], "arch": _arch_tag(int(target["arch"])),
                "capability": int(target["arch"]), "cubin": member(cubins[0]), "group": meta_name,
                "files": {f: member(f) for f in files}, "components": keys.get(key),
                "ir": [member(f) for f in files if f.endswith(_IR_SUFFIXES)]})
        elif any(f.endswith(suffix) or f.endswith(".so") for f in files):
            found["modules"].append({"key": key, "files": {f: member(f) for f in files}, "components": keys.get(key)})
        elif any(f.endswith(".autotune.json") for f in files):
            found["autotune"].append({"key": key, "files": {f: member(f) for f in files}})
        else:
            found["skipped"].append({"key": key, "why": f"unrecognised entry ({', '.join(files) or 'empty'})"})
    return found


def write(root, package=None, revision=None, sequence=1, description=None, pins=None):
    """Writes root/kiln.toml and root/capture.json from the capture in `root`; returns the summary
    printed by `python -m kiln.capture`."""
    found = scan(root)
    if not found["kernels"]:
        raise CaptureError(f"{root}: no Triton kernel was compiled while the app ran ({len(found['torch'])} "
                           "torch.compile artifact file(s), no kernel for them to serve): did the app run its "
                           "kernels on a CUDA GPU, or were they all cache hits elsewhere?")
    package = package or re.sub(r"[^a-z0-9._-]", "-", os.path.basename(os.path.abspath(root)).lower()).strip("-.") \
        or "captured-app"
    revision = revision or f"capture-{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%SZ}"
    toolchain = {"framework": "triton", **(pins or {})}
    extra = ["capture.json"] + list(found["torch"])
    entries = {}
    for k in found["kernels"]:
        extra += [m for f, m in k["files"].items() if m != k["cubin"] and m not in k["ir"]]
        entries[k["key"]] = {"kind": "kernel", "kernel": k["kernel"], "files": k["files"], "group": k["group"],
                             "arch": k["arch"], "components": k["components"]}
    for m in found["modules"] + found["autotune"]:
        extra += list(m["files"].values())
        entries[m["key"]] = {"kind": "module" if m in found["modules"] else "autotune", "files": m["files"],
                             "components": m.get("components")}
    index = {"format": FORMAT, "package": package, "toolchain": toolchain, "ptxas": found["pins"]["ptxas"],
             "triton": entries, "torch": found["torch"], "skipped": found["skipped"]}
    with open(os.path.join(root, "capture.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    lines = ["# Written by kiln.capture: every kernel the app's compilers built, as they built it.",
             "[package]", f"name = {toml_value(package)}", f"kernel_revision = {toml_value(revision)}",
             f"sequence = {int(sequence)}"]
    if description:
        lines.append(f"description = {toml_value(description)}")
    lines += ["", "[toolchain]"] + [f"{k} = {toml_value(str(v))}" for k, v in toolchain.items() if v is not None]
    lines += ["", "[files]", f"extra = {toml_value(sorted(set(extra)))}"]
    for k in found["kernels"]:
        lines += ["", "[[kernel]]", f"name = {toml_value(k['kernel'])}", f"entry = {toml_value(k['entry'])}",
                  'backend = "cuda"', f"ir = {toml_value(k['ir'])}",
                  f"code = [{toml_value({'arch': k['arch'], 'file': k['cubin']})}]"]
    with open(os.path.join(root, "kiln.toml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return {"kernels": len(found["kernels"]), "modules": len(found["modules"]), "autotune": len(found["autotune"]),
            "torch_artifacts": len(found["torch"]), "skipped": found["skipped"],
            "archs": sorted({k["arch"] for k in found["kernels"]})}
