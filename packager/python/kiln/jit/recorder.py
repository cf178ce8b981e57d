"""Recording a capture: a Triton cache manager that keeps every entry the app's compilers write in
the capture folder, and the hooks that note each key's components beside it.

Layout of a capture folder while the app runs (several processes may write it at once):

    triton/<KEY>/<file>      what Triton put under cache key KEY (kernel files, host modules,
                             autotune results), byte for byte
    keys/<KEY>.json          the key's components (triton_keys.py), written before Triton looks it up
    torch/artifacts-<pid>.bin   torch.compiler.save_cache_artifacts() of each process that compiled
    events/<pid>.jsonl       one line per compilation Triton's listener reported
"""
import atexit
import json
import os
import threading

from triton.runtime.cache import CacheManager, FileCacheManager

from .files import safe_name, write_atomic

CAPTURE_DIR_ENV = "KILN_CAPTURE_DIR"


def capture_root():
    root = os.environ.get(CAPTURE_DIR_ENV)
    if not root:
        raise RuntimeError(f"kiln capture: {CAPTURE_DIR_ENV} is not set (use python -m kiln.capture or kiln.capture.capture())")
    return root


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


def record_components(key, components):
    """keys/<KEY>.json, once per key (the first writer wins; every writer writes the same)."""
    path = os.path.join(capture_root(), "keys", safe_name(key, "Triton cache key") + ".json")
    if not os.path.exists(path):
        write_atomic(path, json.dumps(components, sort_keys=True))


def record_event(event):
    path = os.path.join(capture_root(), "events", f"{os.getpid()}.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(event, sort_keys=True) + "\n")


def save_torch_artifacts():
    """torch.compile's own caches (Inductor's graphs, autotuning, AOTAutograd) of this process, as
    torch.compiler.save_cache_artifacts() gives them, so a served boot neither regenerates nor
    re-autotunes them. Nothing where the process never imported torch or compiled nothing."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "compiler") or not hasattr(torch.compiler, "save_cache_artifacts"):
        return None
    saved = torch.compiler.save_cache_artifacts()
    if not saved:
        return None
    data = saved[0]
    path = os.path.join(capture_root(), "torch", f"artifacts-{os.getpid()}.bin")
    return write_atomic(path, data)


class CaptureSession:
    """What a capturing process does: every key's components noted, every compilation noted, and,
    with `targets` (["sm_80", "sm_100a"]), every kernel compiled again for each of those targets
    with the same source and the options the app chose, so one capture serves a mixed fleet."""

    kind = "capture"
    cache_manager_class = CaptureCacheManager

    def __init__(self, targets=()):
        self.targets = [_capability(t) for t in targets]
        self.archs = set()
        self._pending = {}
        self._local = threading.local()

    def installed(self):
        atexit.register(self.finish)

    def on_key(self, name, components, src=None, backend=None, options=None):
        record_components(name, components)
        if components["kind"] == "kernel":
            self.archs.add(components["arch"])
            if self.targets and src is not None and not getattr(self._local, "cross", False):
                self._pending[id(src)] = (src, backend, options)

    def on_compiled(self, src, metadata, cache_hit):
        record_event({"kernel": getattr(src, "name", None), "hash": metadata.get("hash"), "cache_hit": bool(cache_hit),
                      "target": str(metadata.get("target")), "pid": os.getpid()})
        pending = self._pending.pop(id(src), None)
        if pending is None or getattr(self._local, "cross", False):
            return
        self._cross_compile(*pending)

    def _cross_compile(self, src, backend, options):
        import triton
        from triton.backends.compiler import GPUTarget
        # The options the app chose: those that differ from the backend's defaults, as the JIT on
        # another GPU would parse them from the same launch arguments.
        defaults = backend.parse_options({}).__dict__
        chosen = {k: v for k, v in options.__dict__.items() if defaults.get(k) != v}
        self._local.cross = True
        try:
            for capability in self.targets:
                if capability == backend.target.arch:
                    continue
                target = GPUTarget("cuda", capability, 32)
                try:
                    triton.compile(src, target=target, options=chosen)
                except Exception as e:  # a kernel the other target cannot run (TMA on sm_80): noted, not fatal
                    record_event({"kernel": getattr(src, "name", None), "cross_target": capability,
                                  "error": f"{type(e).__name__}: {e}"[:2000], "pid": os.getpid()})
                self.archs.add(capability)
        finally:
            self._local.cross = False

    def finish(self):
        """Saves torch.compile's artifacts and the ptxas pins; once (the context manager and
        atexit may both call it)."""
        if getattr(self, "_finished", False):
            return
        self._finished = True
        from . import hooks
        try:
            save_torch_artifacts()
        finally:
            pins = hooks.ptxas_pins(a for a in self.archs if a is not None)
            if pins:
                write_atomic(os.path.join(capture_root(), "keys", f"ptxas-{os.getpid()}.pins"),
                             json.dumps(pins, sort_keys=True))


def _capability(target):
    """'sm_80' / 'sm_90a' / 'sm_100a' / 90 -> 90 (Triton's capability number)."""
    text = str(target).strip()
    digits = text[3:].rstrip("af") if text.startswith("sm_") else text
    if not digits.isdigit():
        raise ValueError(f"target {target!r}: expected sm_XY (sm_80, sm_90a, sm_100a)")
    return int(digits)
