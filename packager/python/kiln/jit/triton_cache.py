"""Triton's cache manager classes (knobs.cache.manager_class / TRITON_CACHE_MANAGER) for a capture
and for a served boot. Kept apart from the sessions so that a process which never imports Triton
(an app of TileLang kernels alone) never imports it for kiln either."""
import json
import os

from triton.runtime.cache import CacheManager, FileCacheManager

from .files import safe_name, write_atomic
from .recorder import capture_root


class CaptureCacheManager(CacheManager):
    """Triton's cache, kept in the capture folder: the app compiles as usual (nothing is looked up
    anywhere else, so every kernel it needs is compiled and recorded once) and every file Triton
    writes lands under triton/<KEY>/."""

    def __init__(self, key, override=False, dump=False):
        self.key = key
        self._other = FileCacheManager(key, override=override, dump=dump) if (override or dump) else None
        self.dir = os.path.join(capture_root(), "triton", safe_name(key, "Triton cache key"))

    def _path(self, filename):
        return os.path.join(self.dir, safe_name(filename, f"Triton cache file under {self.key}"))

    def get_file(self, filename):
        if self._other:
            return self._other.get_file(filename)
        path = self._path(filename)
        return path if os.path.exists(path) else None

    def get_group(self, filename):
        if self._other:
            return self._other.get_group(filename)
        grp = self._path(f"__grp__{filename}")
        if not os.path.exists(grp):
            return None
        with open(grp) as f:
            names = json.load(f).get("child_paths", {})
        paths = {name: self._path(name) for name in names}
        return paths if all(os.path.exists(p) for p in paths.values()) else None

    def put(self, data, filename, binary=True):
        if self._other:
            return self._other.put(data, filename, binary)
        return write_atomic(self._path(filename), data if isinstance(data, bytes) else str(data))

    def put_group(self, filename, group):
        if self._other:
            return self._other.put_group(filename, group)
        # Written last by Triton: the entry is complete. Names only, so the folder can move.
        names = {safe_name(name, "Triton group member"): safe_name(os.path.basename(path), "Triton group path")
                 for name, path in group.items()}
        return self.put(json.dumps({"child_paths": names}), f"__grp__{filename}")


class ServeCacheManager(CacheManager):
    """Triton's cache manager while serving (knobs.cache.manager_class, or
    TRITON_CACHE_MANAGER=kiln.jit.triton_cache:ServeCacheManager): every call goes to this process's serve
    session; without one it refuses, saying why, rather than letting Triton compile or read
    another cache."""

    def __init__(self, key, override=False, dump=False):
        from . import hooks
        from .served import ServeSession
        session = hooks.session()
        if not isinstance(session, ServeSession):
            raise RuntimeError("kiln serve: TRITON_CACHE_MANAGER names kiln's served cache, but no serve session is "
                               "active in this process: start the app with python -m kiln.serve (which arms every "
                               "Python process it starts), or call kiln.serve.enable() before Triton compiles")
        self.key, self.session = key, session

    def get_file(self, filename):
        return self.session.lookup(self.key, filename, group=False)

    def get_group(self, filename):
        return self.session.lookup(self.key, filename, group=True)

    def put(self, data, filename, binary=True):
        return self.session.store(self.key, data, filename)

    def put_group(self, filename, group):
        names = {n: os.path.basename(p) for n, p in group.items()}
        return self.session.store(self.key, json.dumps({"child_paths": names}), f"__grp__{filename}")
