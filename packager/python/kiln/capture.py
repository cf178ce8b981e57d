"""Capture what an app's JIT compilers build, unchanged app, one command:

    python -m kiln.capture -o DIR [--target sm_80,sm_100a] [--package NAME] [--sequence N]
                           [--revision R] [--pack KEY] -- python app.py ARGS...

or in-process:

    with kiln.capture.capture("DIR", targets=["sm_80"]) as c:
        run_the_app()
    print(c.summary)

Every Triton kernel the app compiles (explicit @triton.jit and @triton.autotune kernels with their
autotune results, and the Triton kernels torch.compile/Inductor generates), every host module
Triton builds for them, torch.compile's own cache artifacts and every @tilelang.jit kernel
(TileLang's cache entry with the cubin its library embeds) land in DIR, which then holds an
ordinary kiln package (kiln.toml): `kiln pack DIR/kiln.toml --key K -o app.kiln` seals and signs
it, and `python -m kiln.serve app.kiln --trust KEYS -- python app.py` boots the app from it.
"""
import argparse
import contextlib
import os
import shutil
import subprocess
import sys

__all__ = ["capture", "start", "stop", "finish", "main"]


def start(directory, targets=()):
    """Starts recording into `directory` in this process: Triton and TileLang are hooked now if
    imported, else as soon as the app imports them. Python processes started after it (the app's
    workers) record into the same folder: the environment they inherit arms them. stop() ends it."""
    directory, targets = os.path.abspath(directory), list(targets)
    os.makedirs(directory, exist_ok=True)
    from .jit import hooks, recorder, tilelang_hooks
    from .jit.boot_hook import when_imported
    session = recorder.CaptureSession(targets)
    # This process's environment, and that of the Python processes the app starts from now on
    # (spawned workers, Inductor's compile workers), which record into the same folder, as under
    # `python -m kiln.capture`.
    session.armed_environment = arm_child_processes(capture_environment(directory, targets), drop=("KILN_SERVE",))
    hooks.activate(session)

    def while_recording(install):  # a compiler imported after stop() is left alone
        return lambda: install() if hooks.session() is session else None
    when_imported("triton", while_recording(lambda: hooks.install(session)))
    when_imported("tilelang", while_recording(lambda: tilelang_hooks.install(session)))
    when_imported("torch", while_recording(lambda: _pin_inductor_dir(session, recorder.inductor_cache_dir(directory))))
    return session


def stop(session):
    """Ends what start() began in this process: torch.compile's artifacts and the ptxas pins are
    saved into the folder, Triton, TileLang and Inductor answer as they did before (their knobs
    back, their hooks passing every call through), and the variables start() set are given back
    their earlier values (those the app has changed since keep the app's), so that processes
    started from now on are not armed. Kernels compiled afterwards are not recorded."""
    from .jit import hooks, inductor_dir
    try:
        session.finish()
    finally:
        hooks.deactivate(session)
        inductor_dir.unpin()
        armed, before = session.armed_environment
        for name, value in before.items():
            if os.environ.get(name) != armed.get(name):
                continue  # changed by the app meanwhile: the app's
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def capture_environment(directory, targets):
    """What a capturing process's environment says, for the process and the app's others alike."""
    from .jit.recorder import inductor_cache_dir, tilelang_cache_dir, triton_cache_dir
    return {
        "KILN_CAPTURE_DIR": directory, "KILN_CAPTURE_TARGETS": ",".join(targets),
        "TRITON_CACHE_MANAGER": "kiln.jit.triton_cache:CaptureCacheManager", "TRITON_CACHE_AUTOTUNING": "1",
        # Fresh compiler caches, so every kernel the app needs is compiled (and so recorded) once.
        # TileLang reads its folder at each lookup; Inductor finds the cubins it launches statically
        # where the capture's cache manager writes them, and so bundles them (recorder.py).
        "TILELANG_CACHE_DIR": tilelang_cache_dir(directory), "TRITON_CACHE_DIR": triton_cache_dir(directory),
        "TORCHINDUCTOR_CACHE_DIR": inductor_cache_dir(directory)}


def _pin_inductor_dir(session, folder):
    from .jit import inductor_dir
    inductor_dir.pin(folder, lambda asked: session.note(
        f"the app set TORCHINDUCTOR_CACHE_DIR to {asked}: Inductor compiled in the capture's own folder {folder} "
        "instead, so that what it compiled was recorded and no cached graph of the app's was sealed"))


def finish(directory, **package_args):
    """Writes DIR/kiln.toml and DIR/capture.json from what was recorded; returns the summary."""
    from .jit import package
    from .export.toolchain import distribution_digest, local_gpu, python_stack
    pins = dict(python_stack())
    try:
        import triton
        pins["triton"] = triton.__version__
        pins["triton_install"] = distribution_digest("triton")
    except ImportError:
        pass
    if os.path.isdir(os.path.join(directory, "tilelang-keys")):
        pins.update(_tilelang_pins())
    pins.update({f"capture_{k}": v for k, v in local_gpu().items()})
    return package.write(directory, pins=pins, **package_args)


def _tilelang_pins():
    """TileLang's version and install digest (without importing it: seconds), and the nvcc it
    compiled with (its key leaves the CUDA toolkit out; kiln records it)."""
    import importlib.metadata
    from .export.toolchain import distribution_digest, tool_release
    try:
        pins = {"tilelang": importlib.metadata.version("tilelang"), "tilelang_install": distribution_digest("tilelang")}
    except importlib.metadata.PackageNotFoundError:
        return {}
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    release = tool_release(nvcc) if nvcc else None
    if release:
        pins["tilelang_nvcc"] = release
    return pins


class _Capture:
    summary = None


@contextlib.contextmanager
def capture(directory, targets=(), **package_args):
    """Records while the block runs; on a clean exit writes the package (summary in .summary)."""
    session = start(directory, targets)
    result = _Capture()
    try:
        yield result
    finally:  # recording ends with the block, however it ends
        stop(session)
    result.summary = finish(directory, **package_args)


def _boot_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "jit", "boot")


def child_environment(base, extra, drop=()):
    """The app's environment: kiln's boot folder first on PYTHONPATH (so every Python process of the
    app arms itself), this kiln importable, `extra` set and `drop` unset. Applied again (a process
    armed by it arms its own children), PYTHONPATH does not grow."""
    env = {k: v for k, v in base.items() if k not in drop}
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = [_boot_path(), package_parent]
    parts = ours + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.update(extra)
    return env


def arm_child_processes(extra, drop=()):
    """This process's environment made the one the commands give an app (child_environment), so
    that every Python process started from now on arms itself the same way: a capture or serve
    started in code covers the app's workers as the commands do. Returns (what it set, what those
    variables were before: None where unset) for the names it changed."""
    env = child_environment(os.environ, extra, drop)
    changed = {k for k in set(os.environ) | set(env) if os.environ.get(k) != env.get(k)}
    before = {k: os.environ.get(k) for k in changed}
    for name in [k for k in os.environ if k not in env]:
        del os.environ[name]
    os.environ.update(env)
    return {k: env.get(k) for k in changed}, before


def _split(parser, argv):
    """(options, the app's command): everything after the first `--` is the app's, untouched."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        parser.error("put the app's command line after --")
    at = argv.index("--")
    return parser.parse_args(argv[:at]), argv[at + 1:]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kiln.capture", description=__doc__.split("\n\n")[0],
                                     usage="python -m kiln.capture -o DIR [options] -- COMMAND [ARGS...]")
    parser.add_argument("-o", "--output", required=True, help="the capture folder (new or empty)")
    parser.add_argument("--target", default="", help="also compile every kernel for these targets (sm_80,sm_100a)")
    parser.add_argument("--package", help="package name (default: the folder's name)")
    parser.add_argument("--revision", help="kernel_revision (default: capture-<UTC time>)")
    parser.add_argument("--sequence", type=int, default=1, help="release sequence (default 1)")
    parser.add_argument("--pack", metavar="KEY", help="then seal DIR into DIR.kiln with this signing key")
    args, command = _split(parser, argv)
    if not command:
        parser.error("no command: put the app's command line after --")
    out = os.path.abspath(args.output)
    if os.path.exists(out) and os.listdir(out):
        parser.error(f"{out} exists and is not empty: capture into a new folder")
    work = os.path.join(out, ".work")
    os.makedirs(work, exist_ok=True)
    targets = [t for t in args.target.split(",") if t]
    env = child_environment(os.environ, dict(
        capture_environment(out, targets),
        # Compile in the app's own processes (Inductor's worker pool would compile in others).
        TORCHINDUCTOR_COMPILE_THREADS="1"), drop=("KILN_SERVE",))
    code = subprocess.call(command, env=env)
    if code != 0:
        print(f"kiln capture: the app exited with status {code}; nothing was packaged ({out} keeps what was "
              "recorded)", file=sys.stderr)
        return code if code > 0 else 1
    from .jit.package import CaptureError
    try:
        summary = finish(out, package=args.package, revision=args.revision, sequence=args.sequence)
    except CaptureError as e:
        print(f"kiln capture: {e}", file=sys.stderr)
        return 3
    shutil.rmtree(work, ignore_errors=True)
    tilelang = f" ({summary['tilelang']} TileLang)" if summary["tilelang"] else ""
    print(f"kiln capture: {summary['kernels']} kernel specialisation(s){tilelang} for {', '.join(summary['archs']) or 'no arch'}, "
          f"{summary['modules']} host module(s), {summary['autotune']} autotune result(s), "
          f"{summary['torch_artifacts']} torch.compile artifact file(s) -> {out}/kiln.toml")
    for s in summary["skipped"]:
        print(f"kiln capture: skipped {s['key']}: {s['why']}", file=sys.stderr)
    for note in summary["notes"]:
        print(f"kiln capture: note: {note}", file=sys.stderr)
    if args.pack:
        from .export.__main__ import kiln_command
        packed = out.rstrip("/") + ".kiln"
        code = subprocess.call([kiln_command() or "kiln", "pack", os.path.join(out, "kiln.toml"), "--key", args.pack, "-o", packed])
        if code != 0:
            return code
    else:
        print(f"next: kiln pack {out}/kiln.toml --key KEY -o app.kiln, then "
              f"python -m kiln.serve app.kiln --trust KEYS -- {' '.join(command)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
