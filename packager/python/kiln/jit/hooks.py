"""Installing a capture or a serve session into Triton (and PyTorch) in this process.

Triton is told through its own extension points where it has them: `knobs.cache.manager_class`
(every lookup and store of compiled kernels, host modules and autotune results),
`knobs.compilation.listener` (every compilation, with `cache_hit`), `knobs.autotuning.cache`.
Three functions are wrapped because Triton offers no hook there, each keeping its behaviour:
  - `get_cache_key` (compiler and JIT): notes the components of every key before it is looked up;
  - `compile_module_from_src` (host modules: cuda_utils, kernel launchers): notes their components;
  - `platform_key`: the same value Triton computes, without running `file` on the interpreter.
Serving also answers `get_ptxas_version` from the archive's pin when the ptxas binary on this
machine is byte-identical to the captured one, so that a served boot runs no ptxas.
"""
import functools
import hashlib
import os
import struct
import sys
import threading

from .. import _forks
from . import triton_keys

_lock = _forks.Lock()
_session = None        # the active capture or serve session of this process
_local = threading.local()
_UNSET = object()      # a Triton knob the app never set in code


def session():
    return _session


def platform_key():
    """Triton's platform_key() (machine, system, bits, linkage: 'x86_64,Linux,64bit,ELF'), computed
    as Python's platform.architecture() computes it from `file -b` on the interpreter, but by
    reading the interpreter's first bytes instead of running a program."""
    bits = f"{struct.calcsize('P') * 8}bit"
    linkage = ""
    try:
        with open(os.path.realpath(sys.executable), "rb") as f:
            if f.read(4) == b"\x7fELF":
                linkage = "ELF"
    except OSError:
        pass
    uname = os.uname()
    return ",".join([uname.machine, uname.sysname, bits, linkage])


def ptxas_path(arch):
    """The ptxas Triton would run for `arch`, found as knobs.nvidia does but without running it."""
    binary = "ptxas-blackwell" if arch >= 100 else "ptxas"
    env = os.environ.get(f"TRITON_{binary.upper().replace('-', '_')}_PATH")
    import triton
    default = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", binary)
    for path in ([env] if env else []) + [default]:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@functools.lru_cache(None)
def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def activate(new_session):
    """Makes `new_session` (recorder.CaptureSession or served.ServeSession) this process's one; the
    compilers are hooked as they are imported (install() for Triton, tilelang_hooks for TileLang)."""
    global _session
    with _lock:
        if _session is new_session:
            return
        if _session is not None:
            raise RuntimeError(f"kiln: a {_session.kind} session is already active in this process")
        _session = new_session
    new_session.installed()


# The Triton knobs kiln sets in a process: (name in notes, knobs group, attribute).
_KNOBS = (("manager_class", "cache", "manager_class"), ("autotuning_cache", "autotuning", "cache"),
          ("listener", "compilation", "listener"))


def _set_knobs(new_session, values):
    """Sets each knob to values[name], noting on the session, per knob, (kiln's value, the app's value
    before: as set in code, _UNSET where the app never set it and it follows the environment)."""
    import triton.knobs as knobs
    new_session.triton_knobs_set = {}
    for name, group, attribute in _KNOBS:
        holder = getattr(knobs, group)
        before = holder.__dict__.get(attribute, _UNSET)
        setattr(holder, attribute, values[name])
        new_session.triton_knobs_set[name] = (holder.__dict__.get(attribute), before)


def _knobs(some_session):
    """(name, knobs group, attribute, the app's value before, still kiln's value?) for each knob
    install() set for `some_session`; nothing where Triton was never hooked for it."""
    knobs = sys.modules.get("triton.knobs")
    if knobs is None:
        return []
    found = []
    for name, group, attribute in _KNOBS:
        if name in getattr(some_session, "triton_knobs_set", {}):
            ours, before = some_session.triton_knobs_set[name]
            holder = getattr(knobs, group)
            found.append((name, holder, attribute, before, holder.__dict__.get(attribute, _UNSET) is ours))
    return found


def deactivate(old_session):
    """Ends `old_session` in this process: Triton's knobs go back to what they were before install()
    (a knob the app has set since keeps the app's value), and the functions it wrapped pass every
    call straight through from now on. Another session may be activated afterwards."""
    global _session
    with _lock:
        if _session is not old_session:
            return
        _session = None
    for _, holder, attribute, before, still_ours in _knobs(old_session):
        if not still_ours:
            continue  # the app set it since: the app's
        if before is _UNSET:
            holder.__dict__.pop(attribute, None)  # back to following the environment
        else:
            setattr(holder, attribute, before)


def replaced_knobs(some_session):
    """The Triton knobs install() set for `some_session` that the app has set to something else
    since: a subset of "manager_class" (Triton's cache manager), "autotuning_cache" and "listener".
    A listener of the app's that has been seen calling kiln's (chained to it) is not counted."""
    chained = getattr(some_session, "listener_chained", False)
    return [name for name, _, _, _, still_ours in _knobs(some_session)
            if not still_ours and not (name == "listener" and chained)]


def install(new_session):
    """Hooks Triton for `new_session` (activating it first)."""
    activate(new_session)
    with _lock:
        if getattr(new_session, "_triton_hooked", False):
            return
        new_session._triton_hooked = True
        import triton.knobs as knobs
        import triton.compiler.compiler as compiler
        import triton.runtime.build as build
        import triton.runtime.jit as jit
        # Knobs for this process (set in code, they win over its environment); the processes
        # the app starts are armed by the environment the commands, or enable() and capture.start(),
        # gave it (kiln/jit/boot first on PYTHONPATH: capture.arm_child_processes).
        previous = knobs.compilation.listener

        def listener(src, metadata, metadata_group, times, cache_hit):
            try:
                if _session is new_session:
                    if knobs.compilation.listener is not listener:
                        # The app set its own listener and it calls this one, as Triton's chaining
                        # does: kiln still sees every compilation, so the listener is not lost.
                        new_session.listener_chained = True
                    new_session.on_compiled(src, metadata, cache_hit)
            finally:
                if previous is not None:
                    previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                             cache_hit=cache_hit)
        # Recorded as set in code, so that deactivate() gives back exactly what the app had.
        _set_knobs(new_session, {"manager_class": new_session.cache_manager_class, "autotuning_cache": True,
                                 "listener": listener})

        original_key = compiler.get_cache_key

        def get_cache_key(src, backend, backend_options, env_vars):
            key = original_key(src, backend, backend_options, env_vars)
            if _session is not new_session:  # ended (deactivate): Triton's own behaviour only
                return key
            name = triton_keys.base32(hashlib.sha256(key.encode("utf-8")).hexdigest())
            from triton.runtime.cache import triton_key
            components = triton_keys.kernel_components(src, backend, backend_options, env_vars, triton_key())
            new_session.on_key(name, components, src=src, backend=backend, options=backend_options)
            return key
        compiler.get_cache_key = get_cache_key
        jit.get_cache_key = get_cache_key

        build.platform_key = platform_key
        original_module = build.compile_module_from_src

        def compile_module_from_src(src, name, *args, **kwargs):
            if _session is not new_session:
                return original_module(src, name, *args, **kwargs)
            where = build.platform_key()  # what Triton's own key uses
            key = hashlib.sha256((src + where).encode("utf-8")).hexdigest()
            new_session.on_key(triton_keys.base32(key), triton_keys.module_components(name, src, where))
            return original_module(src, name, *args, **kwargs)
        build.compile_module_from_src = compile_module_from_src
        _patch_backend_modules(compile_module_from_src)


def _patch_backend_modules(compile_module_from_src):
    """The NVIDIA backend's driver imported compile_module_from_src by name: rebind it there (and in
    any backend driver already imported)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("triton.backends.") and name.endswith(".driver") and \
                hasattr(module, "compile_module_from_src"):
            module.compile_module_from_src = compile_module_from_src
    try:
        import triton.backends.nvidia.driver as nvidia_driver
        nvidia_driver.compile_module_from_src = compile_module_from_src
    except ImportError:
        pass


def answer_ptxas_version(pins):
    """Serving: backend.hash() asks `ptxas --version`; where the ptxas binary Triton would run for
    an arch is byte-identical to the one the capture pinned, its pinned version text is the answer
    (same bytes, same output), and no program runs. Otherwise Triton runs it as usual."""
    import triton.backends.nvidia.compiler as nvidia_compiler
    original = nvidia_compiler.get_ptxas_version

    @functools.lru_cache()
    def get_ptxas_version(arch=80):
        pin = pins.get(str(arch))
        path = ptxas_path(arch)
        if pin and path and file_sha256(path) == pin["sha256"]:
            return pin["version"]
        return original(arch)
    nvidia_compiler.get_ptxas_version = get_ptxas_version


def libcuda_dir():
    """The folder of the libcuda.so.1 this process loads, found by loading it and reading
    /proc/self/maps (what Triton's libcuda_dirs() learns by running /sbin/ldconfig -p)."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(" ")[-1]
                if os.path.basename(path).startswith("libcuda.so"):
                    return os.path.dirname(path)
    except OSError:
        return None
    return None


def ptxas_pins(archs):
    """{arch: {"sha256", "version"}} of the ptxas Triton ran for each arch in this process (its
    get_ptxas_version is cached, so this runs nothing new)."""
    import triton.backends.nvidia.compiler as nvidia_compiler
    pins = {}
    for arch in sorted(set(archs)):
        path = ptxas_path(arch)
        if path is None:
            continue
        pins[str(arch)] = {"sha256": file_sha256(path), "version": nvidia_compiler.get_ptxas_version(arch)}
    return pins
