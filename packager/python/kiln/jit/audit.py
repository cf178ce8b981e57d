"""Programs this process starts, seen by a Python audit hook (sys.addaudithook: subprocess, exec,
spawn, system): a served boot's report lists them, so "no compiler ran" is a recorded fact rather
than a claim. Audit hooks cannot be removed; this one only appends to a list."""
import sys

from .. import _forks

_EVENTS = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.system", "os.spawn")
programs = []
_lock = _forks.Lock()
_installed = []


def _caller():
    """'file:line' of the innermost frames outside the standard library that started the program:
    what a report reader needs to know who ran it."""
    import sysconfig
    stdlib = sysconfig.get_paths()["stdlib"]
    frame, found = sys._getframe(2), []
    while frame is not None and len(found) < 3:
        path = frame.f_code.co_filename
        if not path.startswith(stdlib) and not path.endswith("audit.py"):
            found.append(f"{path}:{frame.f_lineno}")
        frame = frame.f_back
    return found


def install():
    with _lock:
        if _installed:
            return
        _installed.append(True)

    def hook(event, args):
        if event in _EVENTS:
            programs.append({"event": event, "program": repr(args[:2] if isinstance(args, tuple) else args)[:300],
                             "from": _caller()})
    sys.addaudithook(hook)
