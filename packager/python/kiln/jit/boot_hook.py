"""Arming capture or serve in a process started with the environment `python -m kiln.capture` /
`python -m kiln.serve` set (kiln/jit/boot/sitecustomize.py calls arm()). No compiler is imported
for kiln: Triton, TileLang and PyTorch are hooked right after the app itself imports them, so a
process that never does pays only for kiln's own small modules (and, serving, opening the archive)."""
import importlib.abc
import os
import sys

CAPTURE_ENV, SERVE_ENV = "KILN_CAPTURE_DIR", "KILN_SERVE"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs callbacks right after a top-level module finishes importing (its __init__ ran)."""

    def __init__(self):
        self.waiting = {}

    def find_spec(self, name, path, target=None):
        if name not in self.waiting:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                callbacks = self.waiting.pop(name)
                exec_module = spec.loader.exec_module

                def run(module, exec_module=exec_module, callbacks=callbacks):
                    exec_module(module)
                    for callback in callbacks:
                        callback()
                spec.loader.exec_module = run
                return spec
        return None


_hook = _AfterImport()


def when_imported(name, callback):
    """callback() now if `name` is imported already, else right after its import."""
    if name in sys.modules:
        callback()
        return
    if _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)
    _hook.waiting.setdefault(name, []).append(callback)


def arm():
    if os.environ.get(CAPTURE_ENV):
        from .. import capture
        targets = [t for t in os.environ.get("KILN_CAPTURE_TARGETS", "").split(",") if t]
        capture.start(os.environ[CAPTURE_ENV], targets=targets)  # hooks Triton and TileLang as they are imported
    elif os.environ.get(SERVE_ENV):
        from . import audit
        audit.install()  # first, so the report sees every program the process starts
        from .. import serve
        serve.enable_from_environment()
