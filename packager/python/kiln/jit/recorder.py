"""Recording a capture: a Triton cache manager that keeps every entry the app's compilers write in
the capture folder, and the hooks that note each key's components beside it.

Layout of a capture folder while the app runs (several processes may write it at once):

    triton/<KEY>/<file>      what Triton put under cache key KEY (kernel files, host modules,
                             autotune results), byte for byte; also TRITON_CACHE_DIR, where
                             Inductor finds the cubins it launches statically
    keys/<KEY>.json          the key's components (triton_keys.py), written before Triton looks it up
    .work/tilelang/          TileLang's cache folder (TILELANG_CACHE_DIR) while the app runs
    .work/inductor/          Inductor's cache folder (TORCHINDUCTOR_CACHE_DIR) while the app runs
    tilelang-keys/<KEY>.json the components of each TileLang key (tilelang_keys.py)
    torch/artifacts-<pid>.bin   torch.compiler.save_cache_artifacts() of each process that compiled
    events/<pid>.jsonl       one line per compilation Triton's listener reported
"""
import atexit
import json
import os
import threading

from .files import safe_name, write_atomic

CAPTURE_DIR_ENV = "KILN_CAPTURE_DIR"


def triton_cache_dir(root):
    """TRITON_CACHE_DIR while capturing: the folder CaptureCacheManager writes Triton's entries into
    (<root>/triton/<KEY>/<file>, Triton's own layout). Inductor looks a kernel's cubin up there to
    launch it statically and to bundle it, cubin included, into torch.compile's cache artifacts; a
    cubin it cannot find there makes Inductor load that kernel from its source at every boot."""
    return os.path.join(root, "triton")


def inductor_cache_dir(root):
    """TORCHINDUCTOR_CACHE_DIR while capturing: a fresh folder, so that Inductor compiles every
    graph and kernel the app needs (and kiln records them) instead of answering from a warm cache;
    kept so for the whole capture (inductor_dir.py)."""
    return os.path.join(root, ".work", "inductor")


def tilelang_cache_dir(root):
    """The TileLang cache folder a capture of `root` compiles into (fresh, so that every TileLang
    kernel the app needs is compiled, and so recorded, once)."""
    return os.path.join(root, ".work", "tilelang")


def capture_root():
    root = os.environ.get(CAPTURE_DIR_ENV)
    if not root:
        raise RuntimeError(f"kiln capture: {CAPTURE_DIR_ENV} is not set (use python -m kiln.capture or kiln.capture.capture())")
    return root


def record_components(key, components, folder="keys"):
    """<folder>/<KEY>.json, once per key (the first writer wins; every writer writes the same)."""
    path = os.path.join(capture_root(), folder, safe_name(key, "cache key") + ".json")
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

    @property
    def cache_manager_class(self):
        from .triton_cache import CaptureCacheManager
        return CaptureCacheManager

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

    def on_tilelang_key(self, key, components):
        if components is not None:
            record_components(key, components, folder="tilelang-keys")
        record_event({"tilelang_key": key, "kernel": (components or {}).get("name"), "pid": os.getpid()})

    def note(self, text):
        record_event({"note": text, "pid": os.getpid()})

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
        import sys
        from . import hooks
        for knob in hooks.replaced_knobs(self):
            self.note(_REPLACED_WHILE_CAPTURING[knob] +
                      (", and not compiled again for the other targets" if knob == "listener" and self.targets else ""))
        try:
            save_torch_artifacts()
        finally:
            if "triton" not in sys.modules:
                return
            pins = hooks.ptxas_pins(a for a in self.archs if a is not None)
            if pins:
                write_atomic(os.path.join(capture_root(), "keys", f"ptxas-{os.getpid()}.pins"),
                             json.dumps(pins, sort_keys=True))


_REPLACED_WHILE_CAPTURING = {
    "manager_class": "the app replaced Triton's cache manager after kiln set its own: what Triton compiled after "
                     "that was recorded only where that manager wrote it into TRITON_CACHE_DIR, the capture's "
                     "triton/ folder (Triton's own FileCacheManager does; a served boot misses the rest)",
    "autotuning_cache": "the app turned Triton's autotuning cache off after kiln turned it on: autotune results "
                        "after that were not recorded (a served boot benchmarks those kernels again)",
    "listener": "the app replaced Triton's compilation listener after kiln chained its own: compilations after "
                "that were recorded but not logged"}


def _capability(target):
    """'sm_80' / 'sm_90a' / 'sm_100a' / 90 -> 90 (Triton's capability number)."""
    text = str(target).strip()
    digits = text[3:].rstrip("af") if text.startswith("sm_") else text
    if not digits.isdigit():
        raise ValueError(f"target {target!r}: expected sm_XY (sm_80, sm_90a, sm_100a)")
    return int(digits)
