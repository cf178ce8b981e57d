"""Put first on PYTHONPATH by `python -m kiln.capture` and `python -m kiln.serve` so that every
Python process of the app (workers included) captures or serves. Then runs the sitecustomize
this one hides, if there is one."""
import importlib.machinery
import importlib.util
import os
import sys


def _arm():
    from kiln.jit import boot_hook
    boot_hook.arm()


def _next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _arm()
except Exception as e:  # serve or capture was asked for and cannot start: the app must not run without it
    raise SystemExit(f"kiln: {os.environ.get('KILN_SERVE') and 'serve' or 'capture'} could not start in "
                     f"{sys.argv[0] or 'python'} (pid {os.getpid()}): {type(e).__name__}: {e}")
_next_sitecustomize()
