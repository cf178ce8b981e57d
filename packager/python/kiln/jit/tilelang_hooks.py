"""Installing a capture or serve session into TileLang in this process.

TileLang has no pluggable cache class: its KernelCache (one per execution backend, all sharing
these methods) computes a key, then reads TILELANG_CACHE_DIR/<version>/<os>-<machine>/kernels/<key>/
and, where nothing loads, compiles and writes the entry there. kiln wraps three of its methods,
each keeping its behaviour:
  - `_generate_key`: notes the key's components (tilelang_keys.py) before the key is looked up;
  - `_load_kernel_from_disk` (serving): right before TileLang reads an entry, the session writes
    it into TileLang's cache folder (kiln's private one) from the verified archive, after libkiln's
    checks, or refuses the key, or lets TileLang compile it and counts that;
  - `cached` (serving): a call made with TileLang's cache turned off compiles without any lookup,
    so it is a miss as well.
"""
import inspect
import threading

from .. import _forks
from . import tilelang_keys

_lock = _forks.Lock()  # held while hashing TileLang's libraries: a forked child gets it free
_build = {}


def compiler_build():
    """kiln's pin of the TileLang build in this process (version and native library digests);
    hashed once (about 100 MB of libraries), in the background from install() on."""
    with _lock:
        if "value" not in _build:
            import tilelang
            _build["value"] = tilelang_keys.compiler_build(tilelang.__version__, _lib_stamp())
        return _build["value"]


def _lib_stamp():
    """TileLang's own `name:sha256|...` stamp of its native libraries (what its key holds under
    TILELANG_CACHE_LIB_STAMP); recomputed the same way where this TileLang lacks the method."""
    from tilelang.cache.kernel_cache import KernelCache
    own = getattr(KernelCache, "_get_tilelang_lib_stamp", None)
    if own is not None:
        return own()
    import hashlib
    import os
    import tilelang.env as tl_env
    stamps = []
    for folder in getattr(tl_env, "TL_LIBS", []) or []:
        for name in ("libtilelang.so", "libtvm_runtime.so", "libtvm_compiler.so"):
            path = os.path.join(folder, name)
            if os.path.exists(path):
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                stamps.append(f"{name}:{h.hexdigest()}")
    return "|".join(stamps) or None


def _name(func):
    try:
        from tilelang.utils.language import get_prim_func_name
        return str(get_prim_func_name(func, "<unknown>"))
    except Exception:
        attrs = getattr(func, "attrs", None)
        return str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "<unknown>"


def key_components(cache, bound, key):
    """The components of the key TileLang just computed, from the call's own arguments."""
    import hashlib
    import tilelang
    a = bound.arguments
    func = a["func"]
    data = tilelang_keys.key_data(
        hashlib.sha256(func.script(show_meta=True).encode()).hexdigest(), a.get("out_idx"), a.get("args"),
        a.get("target"), a.get("target_host"), a.get("execution_backend"), a.get("pass_configs"),
        a.get("compile_flags"), cache._get_base_key())
    return tilelang_keys.components(_name(func), data, key, compiler_build(), tilelang.__version__)


def install(session):
    """Wraps TileLang's KernelCache for `session` (recorder.CaptureSession or served.ServeSession),
    activating the session first; once per session."""
    from . import hooks
    hooks.activate(session)
    with _lock:
        if getattr(session, "_tilelang_hooked", False):
            return
        session._tilelang_hooked = True
    from tilelang.cache.kernel_cache import KernelCache
    threading.Thread(target=compiler_build, name="kiln-tilelang-build", daemon=True).start()
    original_key = KernelCache._generate_key
    signature = inspect.signature(original_key)

    def _generate_key(self, *args, **kwargs):
        key = original_key(self, *args, **kwargs)
        if hooks.session() is not session:  # ended (hooks.deactivate): TileLang's own behaviour only
            return key
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            components = key_components(self, bound, key)
        except Exception as e:  # a TileLang whose key takes other inputs: noted; TileLang carries on unhindered
            components = None
            session.note(f"TileLang key {key}: its components could not be read ({type(e).__name__}: {e})")
        session.on_tilelang_key(key, components)
        return key
    KernelCache._generate_key = _generate_key

    if session.kind != "serve":
        return
    session.tilelang_build = compiler_build
    original_load = KernelCache._load_kernel_from_disk
    original_cached = KernelCache.cached

    def _load_kernel_from_disk(self, key, *args, **kwargs):
        served = session.tilelang_lookup(key, self._get_cache_path(key))
        kernel = original_load(self, key, *args, **kwargs)
        if kernel is None:
            session.tilelang_not_loaded(key, served)
        return kernel
    KernelCache._load_kernel_from_disk = _load_kernel_from_disk

    def cached(self, func=None, *args, **kwargs):
        from tilelang import env
        if not env.is_cache_enabled():
            session.tilelang_cache_disabled(_name(func))
        return original_cached(self, func, *args, **kwargs)
    KernelCache.cached = cached
