"""Triton's cache key, taken apart. Triton 3.x names a compiled kernel by

    sha256(f"{triton_key()}-{src.hash()}-{backend.hash()}-{options.hash()}-{sorted(env_vars)}")

(`triton.runtime.cache.get_cache_key`), and its cache manager receives only base32 of that digest.
So a lookup that misses says nothing about why. kiln records the components next to every key it
captures and again for every key asked for at serve time, so a miss can name what differs:

    compiler-build   triton_key(): Triton's version, every compiler/backend/language .py, libtriton.so
    source           the kernel's own source (its JITFunction.cache_key: the function, its @jit callees, globals)
    specialisation   the signature, constexprs and attributes (divisibility, == 1) of this call
    ptxas            the assembler's `--version` and the architecture (backend.hash())
    arch             ... of which the architecture alone
    options          num_warps, num_stages, ... (backend options)
    env              Triton's cache-invalidating environment variables
    platform         host modules (cuda_utils, launchers): the machine, OS and ABI the .so is for
"""
import base64
import functools
import hashlib
import json

# The order a miss is explained in: the first component that differs is the reason.
REASONS = ("compiler-build", "source", "specialisation", "arch", "ptxas", "options", "env", "platform",
           "host-module-source", "autotune-configs", "not-captured")


def base32(hex_digest):
    """The name Triton gives a cache manager for a sha256 hex digest (triton.runtime.cache._base32)."""
    return base64.b32encode(bytes.fromhex(hex_digest)).decode("ascii").rstrip("=")


@functools.lru_cache(maxsize=4)
def _compiler_build(triton_key_text):
    """SHA-256 of triton_key() (a few KB, the same for every kernel of the process): hashed once."""
    return _sha(triton_key_text)


def _sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain(value):
    """A JSON-able, stable rendering of an option or constexpr value (tuples, enums, dtypes)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return str(value)


def kernel_components(src, backend, options, env_vars, triton_key_text):
    """The components of one kernel's key, as recorded in capture.json and compared on a miss."""
    fn = getattr(src, "fn", None)
    source = {"name": getattr(src, "name", None)}
    if fn is not None:  # an ASTSource: a @triton.jit function
        source.update(fn_cache_key=fn.cache_key, signature=_plain(dict(src.signature)),
                      constexprs=_plain({str(k): getattr(v, "cache_key", v) for k, v in src.constants.items()}),
                      attrs=str(src.attrs))
    else:  # an IRSource: the IR text itself is the source
        source.update(ir_sha256=src.hash())
    target = getattr(backend, "target", None)
    backend_hash = backend.hash()
    return {
        "kind": "kernel",
        "compiler_build": _compiler_build(triton_key_text),
        "triton_version": triton_key_text.split("-", 1)[0][:32],
        "source": source,
        "src_hash": src.hash(),
        "backend_hash_sha256": _sha(backend_hash),
        "ptxas": _ptxas_line(backend_hash),
        "arch": getattr(target, "arch", None),
        "target": {"backend": getattr(target, "backend", None), "arch": getattr(target, "arch", None),
                   "warp_size": getattr(target, "warp_size", None)},
        "options": _plain({k: v for k, v in options.__dict__.items()}),
        "options_hash": options.hash(),
        "env": _plain(dict(env_vars)),
    }


def _ptxas_line(backend_hash):
    """The last line of `ptxas --version` (its build) from backend.hash() = f"{version}-{arch}"."""
    lines = backend_hash.rsplit("-", 1)[0].strip().splitlines()
    return lines[-1] if lines else ""


def module_components(name, src_text, platform_key):
    """The components of a host module's key (cuda_utils, a kernel launcher): sha256(src + platform)."""
    return {"kind": "module", "name": name, "src_sha256": _sha(src_text), "platform": platform_key}


def differing(asked, have):
    """The first component (in REASONS order) where the key asked for differs from a captured one,
    with a line saying how; None where they agree."""
    if asked.get("kind") != have.get("kind"):
        return "not-captured", f"asked for a {asked.get('kind')}, the archive has a {have.get('kind')}"
    if asked["kind"] == "module":
        if asked["platform"] != have["platform"]:
            return "platform", f"platform {asked['platform']!r}, captured on {have['platform']!r}"
        if asked["src_sha256"] != have["src_sha256"]:
            return "host-module-source", (f"{asked['name']}'s C source differs (sha256 {asked['src_sha256'][:16]}..., "
                                          f"captured {have['src_sha256'][:16]}...)")
        return None
    if asked["compiler_build"] != have["compiler_build"]:
        return "compiler-build", (f"Triton build differs (triton_key sha256 {asked['compiler_build'][:16]}... "
                                  f"version {asked['triton_version']}, captured {have['compiler_build'][:16]}... "
                                  f"version {have['triton_version']}): a changed compiler is never served")
    a, h = asked["source"], have["source"]
    if a.get("fn_cache_key") != h.get("fn_cache_key") or a.get("ir_sha256") != h.get("ir_sha256"):
        return "source", f"the kernel's source differs (cache_key {_short(a)} vs captured {_short(h)})"
    for part in ("signature", "constexprs", "attrs"):
        if a.get(part) != h.get(part):
            return "specialisation", f"{part} {json.dumps(a.get(part))} vs captured {json.dumps(h.get(part))}"
    if asked["arch"] != have["arch"]:
        return "arch", f"target arch {asked['arch']} vs captured {have['arch']}"
    if asked["backend_hash_sha256"] != have["backend_hash_sha256"]:
        return "ptxas", f"ptxas {asked['ptxas']!r} vs captured {have['ptxas']!r}"
    if asked["options_hash"] != have["options_hash"]:
        diff = sorted(k for k in set(asked["options"]) | set(have["options"])
                      if asked["options"].get(k) != have["options"].get(k))
        shown = ", ".join(f"{k}={asked['options'].get(k)!r} (captured {have['options'].get(k)!r})" for k in diff[:4])
        return "options", f"options differ: {shown or 'same values, another options hash'}"
    if asked["env"] != have["env"]:
        return "env", f"cache-invalidating environment {asked['env']} vs captured {have['env']}"
    return None


def _short(source):
    key = source.get("fn_cache_key") or source.get("ir_sha256") or ""
    return (key[:16] + "...") if key else "none"


def explain_miss(asked, candidates):
    """(reason, detail) for a key the archive lacks: compared with the captured entries of the same
    kernel (or module) name, the closest one's first differing component; 'not-captured' when the
    archive has nothing of that name."""
    if asked is None:
        return "not-captured", "the archive has no entry under this key (its components were not seen here)"
    if not candidates:
        what = asked.get("source", {}).get("name") if asked["kind"] == "kernel" else asked.get("name")
        return "not-captured", f"the capture never compiled {asked['kind']} {what!r}"
    best = None
    for have in candidates:
        found = differing(asked, have)
        if found is None:  # same components, another key: Triton changed how it hashes them
            return "compiler-build", "every recorded component agrees but the key differs: Triton's key changed"
        rank = REASONS.index(found[0])
        if best is None or rank > best[0]:  # the candidate that agrees on the most components
            best = (rank, found)
    return best[1]
