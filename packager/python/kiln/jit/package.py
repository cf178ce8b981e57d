"""A capture folder (recorder.py's layout) into an ordinary kiln package folder: kiln.toml, and
capture.json, the index a served boot reads (after verification) to answer Triton's lookups.

Each Triton kernel specialisation becomes one [[kernel]] whose code object is its cubin, so
`kiln inspect`, `kiln preflight --target`, `kiln verify` and the store see it like any other; its
IR stages are its `ir`; its metadata, Triton's group file, host modules, autotune results and
torch.compile's artifacts are `[files] extra`. Nothing is renamed: members keep Triton's file names
under triton/<KEY>/, so what is served is byte for byte what Triton wrote.

Each TileLang cache entry (tilelang_capture.py) becomes one [[kernel]] too: its code object is the
cubin TileLang's nvcc produced, found byte for byte inside the entry's host library (so what the
resolver judges is what the driver will load), its generated CUDA and host code are its `ir`, and
the entry's other files are `[files] extra` under tilelang/<KEY>/.
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
        if key.startswith("tmp."):  # Inductor's TritonBundler writing an entry it then renames
            found["skipped"].append({"key": key, "why": "a temporary folder of Inductor's, not a cache entry"})
            continue
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


def _device_symbol(cuda_source):
    """The first __global__ function of TileLang's generated device code (its kernel symbol)."""
    m = re.search(r'__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(', cuda_source)
    return m.group(1) if m else None


def _cubin_arch(data):
    """'sm_90a' of a cubin, read as kiln pack reads it (the SM from e_flags, bits 8-15 from ELF
    ABI version 8 on, bits 0-7 before; the 'a' from e_flags or the ptxas command line nvcc
    records); None where it is not a CUDA ELF. kiln pack checks the claim again."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or int.from_bytes(data[18:20], "little") != 190:
        return None
    abi, flags = data[8], int.from_bytes(data[48:52], "little")
    sm = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    arch = f"sm_{sm}"
    if flags & (0x8 if abi >= 8 else 0x800) or re.search(rb"sm_%da\b" % sm, data):
        arch += "a"
    return arch


def scan_tilelang(root, taken):
    """TileLang's cache as the capture left it (<root>/.work/tilelang, tilelang_capture.py): its
    complete entries, each with the cubin its host library embeds. Returns (kernels, skipped); the
    entries' files are copied to <root>/tilelang/<KEY>/ and the cubin to
    <root>/tilelang/<KEY>/kiln-device.cubin."""
    from .files import safe_name, write_atomic
    cache = os.path.join(root, ".work", "tilelang")
    keys = {os.path.basename(p)[:-5]: _read_json(p) for p in glob.glob(os.path.join(root, "tilelang-keys", "*.json"))}
    binaries = []
    for path in sorted(glob.glob(os.path.join(cache, "*", "cuda-binaries", "*", "kernel.cubin"))):
        with open(path, "rb") as f:
            binaries.append(f.read())
    kernels, skipped = [], []
    for folder in sorted(glob.glob(os.path.join(cache, "*", "*", "kernels", "*"))):
        key = os.path.basename(folder)
        label = f"tilelang:{key}"
        files = sorted(f for f in os.listdir(folder) if not f.startswith("."))
        library = next((f for f in ("executable.so", "kernel_lib.so") if f in files), None)
        params = next((f for f in ("params.json", "params.pkl") if f in files), None)
        if not re.fullmatch(r"[0-9a-f]{64}", key) or library is None or params is None or "manifest.json" not in files:
            skipped.append({"key": label, "why": f"incomplete TileLang entry ({', '.join(files) or 'empty'})"})
            continue
        source = ""
        if "device_kernel.cu" in files:
            with open(os.path.join(folder, "device_kernel.cu"), errors="replace") as f:
                source = f.read()
        symbol = _device_symbol(source)
        if symbol is None:
            skipped.append({"key": label, "why": "no __global__ kernel found in its device_kernel.cu"})
            continue
        with open(os.path.join(folder, library), "rb") as f:
            host_library = f.read()
        # Only cubins holding the kernel's symbol are searched for inside the library (an app's
        # binaries share few symbols, so this stays linear in the capture's size).
        device = next((b for b in binaries if symbol.encode() in b and b in host_library), None)
        if device is None:
            skipped.append({"key": label, "why": f"no cubin of the capture holding {symbol} is embedded in its {library} "
                                                 "(a fatbin, NVRTC, or TileLang's binary cache off): nothing kiln can check"})
            continue
        arch = _cubin_arch(device)
        if arch is None:
            skipped.append({"key": label, "why": f"the arch of the cubin embedded in its {library} could not be read"})
            continue
        components = keys.get(key)
        name = _kernel_name((components or {}).get("name") or symbol, key, taken)
        taken.add(name)
        member = lambda f: f"tilelang/{key}/{f}"  # noqa: E731
        for f in files:
            safe_name(f, f"TileLang cache file under {key}")
            with open(os.path.join(folder, f), "rb") as src:
                write_atomic(os.path.join(root, member(f)), src.read())
        write_atomic(os.path.join(root, member("kiln-device.cubin")), device)
        kernels.append({"key": key, "kernel": name, "entry": symbol, "arch": arch, "cubin": member("kiln-device.cubin"),
                        "library": library, "files": {f: member(f) for f in files}, "components": components,
                        "ir": [member(f) for f in ("device_kernel.cu", "host_kernel.cu") if f in files]})
    return kernels, skipped


def capture_notes(root):
    """What the capturing processes noted (events/<pid>.jsonl lines with a "note"), each once, in
    the order first noted. A line that is not JSON (a process killed mid-write) is passed over."""
    notes = []
    for path in sorted(glob.glob(os.path.join(root, "events", "*.jsonl"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    note = json.loads(line).get("note")
                except (ValueError, AttributeError):
                    continue
                if isinstance(note, str) and note not in notes:
                    notes.append(note)
    return notes


def write(root, package=None, revision=None, sequence=1, description=None, pins=None):
    """Writes root/kiln.toml and root/capture.json from the capture in `root`; returns the summary
    printed by `python -m kiln.capture`."""
    found = scan(root)
    tilelang_kernels, tilelang_skipped = scan_tilelang(root, {k["kernel"] for k in found["kernels"]})
    found["skipped"] += tilelang_skipped
    if not found["kernels"] and not tilelang_kernels:
        raise CaptureError(f"{root}: no Triton or TileLang kernel was compiled while the app ran "
                           f"({len(found['torch'])} torch.compile artifact file(s), no kernel for them to serve): did "
                           "the app run its kernels on a CUDA GPU, or were they all cache hits elsewhere?")
    package = package or re.sub(r"[^a-z0-9._-]", "-", os.path.basename(os.path.abspath(root)).lower()).strip("-.") \
        or "captured-app"
    revision = revision or f"capture-{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%SZ}"
    frameworks = [f for f, ks in (("triton", found["kernels"]), ("tilelang", tilelang_kernels)) if ks]
    toolchain = {"framework": "+".join(frameworks), **(pins or {})}
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
    tilelang = {}
    for k in tilelang_kernels:
        extra += [m for m in k["files"].values() if m not in k["ir"]]
        tilelang[k["key"]] = {"kind": "tilelang", "kernel": k["kernel"], "files": k["files"], "library": k["library"],
                              "cubin": k["cubin"], "arch": k["arch"], "components": k["components"]}
    index = {"format": FORMAT, "package": package, "toolchain": toolchain, "ptxas": found["pins"]["ptxas"],
             "triton": entries, "tilelang": tilelang, "torch": found["torch"], "skipped": found["skipped"]}
    with open(os.path.join(root, "capture.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    lines = ["# Written by kiln.capture: every kernel the app's compilers built, as they built it.",
             "[package]", f"name = {toml_value(package)}", f"kernel_revision = {toml_value(revision)}",
             f"sequence = {int(sequence)}"]
    if description:
        lines.append(f"description = {toml_value(description)}")
    lines += ["", "[toolchain]"] + [f"{k} = {toml_value(str(v))}" for k, v in toolchain.items() if v is not None]
    lines += ["", "[files]", f"extra = {toml_value(sorted(set(extra)))}"]
    for k in found["kernels"] + tilelang_kernels:
        lines += ["", "[[kernel]]", f"name = {toml_value(k['kernel'])}", f"entry = {toml_value(k['entry'])}",
                  'backend = "cuda"', f"ir = {toml_value(k['ir'])}",
                  f"code = [{toml_value({'arch': k['arch'], 'file': k['cubin']})}]"]
    with open(os.path.join(root, "kiln.toml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return {"kernels": len(found["kernels"]) + len(tilelang_kernels), "tilelang": len(tilelang_kernels),
            "modules": len(found["modules"]), "autotune": len(found["autotune"]),
            "torch_artifacts": len(found["torch"]), "skipped": found["skipped"], "notes": capture_notes(root),
            "archs": sorted({k["arch"] for k in found["kernels"] + tilelang_kernels})}
