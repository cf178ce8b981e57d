"""TileLang's cache key, taken apart. TileLang 0.1.x names a compiled kernel (KernelCache._generate_key)

    sha256(json.dumps({"func": sha256(prim_func.script(show_meta=True)), "out_idx", "args_repr",
                       "target", "target_host", "execution_backend", "pass_configs", "compile_flags",
                       "version", "platform"[, "tilelang_lib"]}, sort_keys=True))

and keeps the entry in TILELANG_CACHE_DIR/<version>/<os>-<machine>/kernels/<key>/. kiln recomputes
that key from the same inputs (so the components recorded are exactly what TileLang hashed, and a
changed recipe is noticed) and adds one pin TileLang's key leaves out: the build of its native
libraries. Components, in the order a miss is explained:

    compiler-build   TileLang's version and the SHA-256 of libtilelang, libtvm_compiler, libtvm_runtime
    source           the kernel's TIR (its code and every shape and constant baked into it)
    specialisation   out_idx and the extra arguments of the compile call
    arch             the device target (its kind and arch)
    options          pass configs, compile flags, execution backend and host target
    platform         the machine TileLang's key names
"""
import hashlib
import json

REASONS = ("compiler-build", "source", "specialisation", "arch", "options", "platform", "not-captured")


def _sha(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()


def compiler_build(version, lib_stamp):
    """kiln's pin of a TileLang build: its version and the digests of its native libraries
    (TileLang's own `name:sha256|...` stamp), hashed together."""
    return _sha(f"{version}|{lib_stamp or 'no native library found'}")


def key_data(func_sha256, out_idx, args, target, target_host, execution_backend, pass_configs, compile_flags, base):
    """The object TileLang hashes into a key, built as KernelCache._generate_key builds it."""
    return {"func": func_sha256,
            "out_idx": list(out_idx) if isinstance(out_idx, (list, tuple)) else [out_idx],
            "args_repr": [repr(a) for a in (args or ())],
            "target": str(target), "target_host": str(target_host) if target_host else None,
            "execution_backend": execution_backend, "pass_configs": pass_configs, "compile_flags": compile_flags,
            **base}


def key_of(data):
    return _sha(json.dumps(data, sort_keys=True))


def _target_arch(target_text):
    """'sm_90a' from TileLang's target rendering (a JSON object or 'cuda -arch=sm_90a'), else the text."""
    try:
        parsed = json.loads(target_text)
        if isinstance(parsed, dict):
            return f"{parsed.get('kind')}:{parsed.get('arch', '?')}"
    except (TypeError, ValueError):
        pass
    for word in str(target_text).split():
        if word.startswith("-arch="):
            return word[len("-arch="):]
    return str(target_text)


def components(name, data, key, build, version):
    """What capture.json records for one TileLang key, and what a server compares on a miss.
    `data` is key_data(...); `key` is TileLang's own key (recorded whether or not kiln's
    recomputation agreed with it, so a changed recipe is visible)."""
    return {"kind": "tilelang", "name": name, "tilelang_version": version, "compiler_build": build,
            "key_data": data, "arch": _target_arch(data.get("target")),
            "key_recomputed": key_of(data) == key}


def differing(asked, have):
    """The first component (REASONS order) where two TileLang keys differ, with a line saying how;
    None where every component agrees."""
    if asked.get("kind") != have.get("kind"):
        return "not-captured", f"asked for a {asked.get('kind')}, the archive has a {have.get('kind')}"
    a, h = asked["key_data"], have["key_data"]
    if asked["compiler_build"] != have["compiler_build"] or a.get("version") != h.get("version"):
        return "compiler-build", (f"TileLang build differs (version {asked['tilelang_version']}, build "
                                  f"{asked['compiler_build'][:16]}...; captured {have['tilelang_version']}, "
                                  f"{have['compiler_build'][:16]}...): a changed compiler is never served")
    if a.get("func") != h.get("func"):
        return "source", (f"the kernel's TIR differs (sha256 {str(a.get('func'))[:16]}... vs captured "
                          f"{str(h.get('func'))[:16]}...): changed code, or other shapes or constants baked in")
    for part in ("out_idx", "args_repr"):
        if a.get(part) != h.get(part):
            return "specialisation", f"{part} {json.dumps(a.get(part))} vs captured {json.dumps(h.get(part))}"
    if a.get("target") != h.get("target"):
        return "arch", f"target {asked['arch']} vs captured {have['arch']}"
    for part in ("pass_configs", "compile_flags", "execution_backend", "target_host"):
        if a.get(part) != h.get(part):
            return "options", f"{part} {json.dumps(a.get(part))} vs captured {json.dumps(h.get(part))}"
    for part in sorted(set(a) | set(h)):
        if a.get(part) != h.get(part):
            return "platform", f"{part} {json.dumps(a.get(part))} vs captured {json.dumps(h.get(part))}"
    return None


def explain_miss(asked, candidates):
    """(reason, detail) for a TileLang key the archive lacks, against the captured entries of the
    same kernel name: the closest one's first differing component."""
    if asked is None:
        return "not-captured", "the archive has no entry under this key (its components were not seen here)"
    if not candidates:
        return "not-captured", f"the capture never compiled TileLang kernel {asked['name']!r}"
    best = None
    for have in candidates:
        found = differing(asked, have)
        if found is None:
            return "compiler-build", "every recorded component agrees but the key differs: TileLang's key changed"
        rank = REASONS.index(found[0])
        if best is None or rank > best[0]:
            best = (rank, found)
    return best[1]
