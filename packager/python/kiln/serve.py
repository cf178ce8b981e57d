"""Serve an app's JIT compilers from a verified kiln archive made by kiln.capture:

    python -m kiln.serve app.kiln --trust KEYS [--policy refuse|compile] [--report FILE] [--threshold N] -- python app.py ...

or one line at the top of the app, before its kernels are first used:

    import kiln.serve; kiln.serve.enable("app.kiln", trust="keys/", policy="refuse")

or the environment alone (what the command above sets): KILN_SERVE=app.kiln KILN_SERVE_TRUST=keys/
[KILN_SERVE_POLICY=compile] [KILN_SERVE_REPORT=/tmp/boot-{pid}.json] [KILN_SERVE_THRESHOLD=2] and
kiln/jit/boot first on PYTHONPATH. enable() sets these for the processes the app starts after it.

Triton's every lookup (kernels, host modules, autotune results) is answered from the archive after
libkiln has checked its signatures, the member's digests and, for a kernel, that its cubin fits the
device; torch.compile's artifacts are loaded from it; TileLang's cache folder is a private one into
which each captured entry is written from verified bytes right before TileLang reads it. A lookup the archive cannot answer is refused
with its reason (policy 'refuse', the default) or compiled and counted ('compile'). report() is the
boot report: served / compiled / refused, by kernel and reason.
"""
import argparse
import os
import sys
import tempfile

__all__ = ["enable", "report", "session", "main"]  # and KilnServeMiss, imported on first use

_state = {}


def enable(archive, trust, *, policy="refuse", report=None, target=None, driver=None, threshold=1, defer=False):
    """Serves this process's Triton (and torch.compile) lookups from `archive` (a path). `target`
    ("sm_90") judges kernels for a described GPU instead of the device (no GPU needed). The archive
    is opened and authenticated now; with `defer`, Triton is hooked when the app imports it rather
    than imported here. Python processes started after it (the app's workers) serve from the same
    archive: the environment they inherit arms them."""
    if session() is not None:
        raise RuntimeError("kiln serve: already serving in this process")
    # Absolute, as text: the same files for this process whatever its later working folder, and for
    # the processes it starts (which inherit them as environment variables).
    archive, trust = (os.fsdecode(os.path.abspath(os.fspath(p))) for p in (archive, trust))
    report = os.fsdecode(os.path.abspath(os.fspath(report))) if report else None
    import kiln
    from .jit import audit, ldcache
    from .jit.boot_hook import when_imported
    audit.install()
    ldcache.install()   # libraries found from the linker's cache file, not by running ldconfig -p
    from .jit.served import ServedArchive, ServeSession
    runtime = kiln.Runtime(trust=trust, threshold=threshold)
    opened = runtime.open(archive)                       # signatures checked here
    served = ServedArchive(opened, target=target, driver=driver)
    # Inductor reads Triton's cache folder directly for the kernels it launches statically: there
    # it must find the files kiln verified and nothing else (a warm cache of another run would
    # otherwise be loaded unchecked).
    os.environ["TRITON_CACHE_DIR"] = served.dir
    new = ServeSession(served, policy=policy, report_path=report)
    new.runtime = runtime
    # No compile workers: a served boot compiles nothing, and a worker pool is a program started.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if served.index.get("torch"):
        _serve_torch_artifacts(new)
    _state["session"] = new
    from .jit import hooks
    hooks.activate(new)
    # The Python processes the app starts from now on (spawned workers) serve from the same
    # archive, as under `python -m kiln.serve`, rather than compile unseen.
    _arm_child_processes(archive, trust, policy, report, target, driver, threshold)
    # Before TileLang is imported (its caches make their folders then), and again when it is.
    os.environ["TILELANG_CACHE_DIR"] = served.tilelang_cache_root()
    when_imported("tilelang", lambda: _hook_tilelang(new))
    if defer:
        when_imported("triton", lambda: _hook_triton(new))
    else:
        _hook_triton(new)
    return new


def serve_environment(archive, trust, policy, report=None, target=None, driver=None, threshold=1):
    """(variables to set, variables to unset): what a served process's environment says, for the
    app the command starts and for the processes an app serving in code starts alike (the paths
    given absolute)."""
    extra = {"KILN_SERVE": archive, "KILN_SERVE_TRUST": trust, "KILN_SERVE_POLICY": policy,
             "TRITON_CACHE_MANAGER": "kiln.jit.triton_cache:ServeCacheManager", "TRITON_CACHE_AUTOTUNING": "1"}
    optional = {"KILN_SERVE_REPORT": report, "KILN_SERVE_TARGET": target,
                "KILN_SERVE_DRIVER": driver, "KILN_SERVE_THRESHOLD": None if threshold == 1 else str(threshold)}
    extra.update({k: v for k, v in optional.items() if v})
    return extra, ("KILN_CAPTURE_DIR",) + tuple(k for k, v in optional.items() if not v)


def _arm_child_processes(*args):
    from .capture import arm_child_processes
    arm_child_processes(*serve_environment(*args))


def _hook_tilelang(new):
    from .jit import tilelang_hooks
    root = new.served.tilelang_cache_root()
    os.environ["TILELANG_CACHE_DIR"] = root
    try:  # TileLang's own setting object, where the app (or TileLang) set the folder in code
        from tilelang.env import env as tilelang_env
        tilelang_env.TILELANG_CACHE_DIR = root
    except (ImportError, AttributeError):
        pass
    tilelang_hooks.install(new)


def _hook_triton(new):
    from .jit import hooks
    if not os.environ.get("TRITON_LIBCUDA_PATH") and new.served.target is None:
        found = hooks.libcuda_dir()           # what Triton would learn by running /sbin/ldconfig -p
        if found:
            os.environ["TRITON_LIBCUDA_PATH"] = found
    hooks.install(new)
    hooks.answer_ptxas_version(new.served.index.get("ptxas", {}))
    # Triton's key hashes its whole libtriton.so (~400 MB) at the first compile() of the process;
    # a served boot knows it will be asked, so it is hashed now, beside the app's own imports.
    import threading
    from triton.runtime.cache import triton_key
    threading.Thread(target=triton_key, name="kiln-serve-triton-key", daemon=True).start()


def _serve_torch_artifacts(session):
    """torch.compile's captured caches, loaded from verified bytes into a private Inductor cache
    folder of this process, so that no cache entry from outside the archive is ever read."""
    from .jit.boot_hook import when_imported
    inductor_dir = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-serve-inductor-")

    def load():
        import torch
        from .jit import inductor_dir as pinned, inductor_serve
        pinned.pin(inductor_dir, lambda asked: session.report.note_once(
            "inductor-cache-dir", f"the app set TORCHINDUCTOR_CACHE_DIR to {asked}: torch.compile's caches are read "
            f"and written in kiln's folder {inductor_dir} instead, which holds only the archive's entries"))
        inductor_serve.admit_static_kernels(session, inductor_dir)
        inductor_serve.keep_tuning_decisions()
        loaded = 0
        for member in session.served.index["torch"]:
            if torch.compiler.load_cache_artifacts(session.served.read(member)) is not None:
                loaded += 1
        session.report.notes.append(f"torch.compile artifacts loaded from {loaded} of "
                                    f"{len(session.served.index['torch'])} captured file(s)")
    when_imported("torch", load)


def enable_from_environment():
    env = os.environ
    missing = [v for v in ("KILN_SERVE", "KILN_SERVE_TRUST") if not env.get(v)]
    if missing:
        raise ValueError(f"{' and '.join(missing)} not set")
    threshold = signers(env.get("KILN_SERVE_THRESHOLD", "1"), "KILN_SERVE_THRESHOLD")
    return enable(env["KILN_SERVE"], env["KILN_SERVE_TRUST"], policy=env.get("KILN_SERVE_POLICY", "refuse"),
                  report=env.get("KILN_SERVE_REPORT"), target=env.get("KILN_SERVE_TARGET") or None,
                  driver=env.get("KILN_SERVE_DRIVER") or None, threshold=threshold, defer=True)


def session():
    return _state.get("session")


def report():
    """The boot report of this process as a dict (None when nothing is served)."""
    s = session()
    return s.report_dict() if s else None


def __getattr__(name):
    if name == "KilnServeMiss":
        from .jit.served import KilnServeMiss
        return KilnServeMiss
    raise AttributeError(name)


def signers(text, where):
    """A signature threshold given as text (`where` names the option or variable): 1 to 64."""
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise ValueError(f"{where} is '{text}': give the number of distinct trusted signers required, 1 to 64")
    return int(text)


def _threshold(text):
    try:
        return signers(text, "--threshold")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv=None):
    from .capture import _split, child_environment
    parser = argparse.ArgumentParser(prog="python -m kiln.serve", description=__doc__.split("\n\n")[0],
                                     usage="python -m kiln.serve ARCHIVE --trust KEYS [options] -- COMMAND [ARGS...]")
    parser.add_argument("archive")
    parser.add_argument("--trust", required=True, help="PEM public key or folder of keys")
    parser.add_argument("--policy", choices=("refuse", "compile"), default="refuse",
                        help="a lookup the archive cannot answer: refuse it (default) or compile and count it")
    parser.add_argument("--report", help="write each process's boot report here as JSON ({pid} is replaced)")
    parser.add_argument("--target", help="judge kernels for this described GPU (sm_90) instead of the device")
    parser.add_argument("--threshold", type=_threshold, default=1, metavar="N",
                        help="distinct trusted signers required, 1 to 64 (default 1)")
    args, command = _split(parser, argv)
    if not command:
        parser.error("no command: put the app's command line after --")
    import kiln
    try:  # refuse a bad archive before the app starts, in one line rather than a traceback
        kiln.Runtime(trust=args.trust, threshold=args.threshold).open(args.archive)
    except kiln.KilnError as e:
        print(f"kiln serve: {args.archive}: {e}; the app was not started", file=sys.stderr)
        return 1
    env = child_environment(os.environ, *serve_environment(
        os.path.abspath(args.archive), os.path.abspath(args.trust), args.policy,
        report=args.report and os.path.abspath(args.report), target=args.target, threshold=args.threshold))
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
