"""Programs this process starts, seen by a Python audit hook (sys.addaudithook: subprocess, exec,
spawn, system): a served boot's report lists them, so "no compiler ran" is a recorded fact rather
than a claim. Audit hooks cannot be removed; this one only appends to a list."""
import sys
import threading

_EVENTS = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.system", "os.spawn")
programs = []
_lock = threading.Lock()
_installed = []


def install():
    with _lock:
        if _installed:
            return
        _installed.append(True)

    def hook(event, args):
        if event in _EVENTS:
            programs.append({"event": event, "program": repr(args[:2] if isinstance(args, tuple) else args)[:300]})
    sys.addaudithook(hook)
