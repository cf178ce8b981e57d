"""The Triton side of kiln.export.triton: importing Triton, naming a target as Triton does, what
the user has (a @triton.jit or @triton.autotune function) and one target's compile, made with
Triton's own binder so that the code is what `fn[grid](...)` would run.

Cross-compilation: Triton compiles and its bundled ptxas assembles for any NVIDIA target without
a GPU (`targets=["sm_80", "sm_90a", "sm_100a"]`). AMD targets are not exported here (Triton's
HIP launcher ABI is not mapped); they are refused by name.
"""
import re

from .declare import DTYPES, Desc, Scalar, Tensor
from .errors import ExportError
from .expr import evaluate


def compiler():
    """The triton module; ExportError where Triton is not installed."""
    try:
        import triton
        return triton
    except ImportError:
        raise ExportError("kiln.export.triton needs Triton (pip install triton)") from None


# ---------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------

# The compute capabilities NVIDIA has made GPUs of (as `kiln preflight --target` knows them): a typo
# such as sm_999 is refused here rather than reaching Triton's code generator.
CUDA_DEVICE_CCS = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121)


def _known_cc(cc, target):
    if cc not in CUDA_DEVICE_CCS:
        raise ExportError(f"target {target!r}: no NVIDIA GPU has compute capability {cc // 10}.{cc % 10} (known: "
                          f"{', '.join(f'sm_{c}' for c in CUDA_DEVICE_CCS)})")
    return cc


def parse_target(target):
    """'sm_90a' / 'sm_80' / 90 / (90, 32) -> (capability, warp size). None: the GPU here."""
    if target is None:
        return None
    if isinstance(target, int):
        return _known_cc(target, target), 32
    if isinstance(target, (tuple, list)):
        return _known_cc(int(target[0]), target), int(target[1]) if len(target) > 1 else 32
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)([af]?)", str(target).strip())
    if not m:
        raise ExportError(f"target {target!r}: kiln.export.triton compiles NVIDIA targets (sm_80, sm_90a, sm_100a, ...); "
                          "AMD targets are not supported by this exporter")
    return _known_cc(int(m.group(1)), target), 32


def _gpu_target(target):
    from triton.backends.compiler import GPUTarget
    if target is None:
        from triton.runtime import driver
        try:
            return driver.active.get_current_target()
        except Exception as e:
            raise ExportError(f"no target given and no GPU to compile for ({type(e).__name__}: {e}); pass "
                              "targets=['sm_90a', ...] to cross-compile") from None
    return GPUTarget("cuda", target[0], target[1])


# ---------------------------------------------------------------------------------------------
# Compiling as Triton's own launch would
# ---------------------------------------------------------------------------------------------

class _FakeDtype:
    """Stands for a torch dtype in the sample call. One instance per kiln dtype, kept for the
    process, and equal and hashed by name: Triton caches what a dtype maps to by the object, so
    a short-lived instance whose id() a later one reused would be taken for the earlier type."""

    _instances = {}

    def __new__(cls, kiln_dtype):
        if kiln_dtype not in cls._instances:
            self = super().__new__(cls)
            self.itemsize, self._name = DTYPES[kiln_dtype][0], DTYPES[kiln_dtype][2]
            self.is_floating_point = kiln_dtype.startswith(("f", "bf"))
            cls._instances[kiln_dtype] = self
        return cls._instances[kiln_dtype]

    def __eq__(self, other):
        return isinstance(other, _FakeDtype) and other._name == self._name

    def __hash__(self):
        return hash(("kiln-fake-dtype", self._name))

    def __str__(self):
        return f"torch.{self._name}"


class _FakeTensor:
    """Stands for a tensor in the sample call: Triton's binder reads only data_ptr and dtype. The
    address is 256-aligned, as every PyTorch allocation is (so Triton assumes 16-byte alignment:
    README.md, "What a kernel assumes")."""

    def __init__(self, t, env):
        self.dtype = _FakeDtype(t.dtype)
        self.shape = [evaluate(s, env) for s in t.shape]

    def data_ptr(self):
        return 1 << 40

    def stride(self):
        return None


def program(fn, config):
    """(JITFunction, constexprs, options) from a @triton.jit function, or from a @triton.autotune
    wrapper and the config to export (an index into its configs or a triton.Config)."""
    triton = compiler()
    from triton.runtime.autotuner import Autotuner, Heuristics
    if isinstance(fn, Heuristics):
        raise ExportError("@triton.heuristics computes constexprs at each call: export the function it wraps (.fn) "
                          "with those constexprs given")
    if isinstance(fn, Autotuner):
        configs = fn.configs
        if config is None:
            if len(configs) != 1:
                raise ExportError(f"{fn.fn.__name__} is autotuned over {len(configs)} configs: pass config=INDEX or "
                                  f"config=triton.Config(...) (one of: {', '.join(str(c) for c in configs)})")
            config = 0
        if isinstance(config, int):
            if not 0 <= config < len(configs):
                raise ExportError(f"config={config}: the autotuner has {len(configs)} configs")
            config = configs[config]
        options = {k: getattr(config, k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg")
                   if getattr(config, k, None) is not None}
        return program(fn.fn, None)[0], dict(config.kwargs), options
    if not isinstance(fn, triton.runtime.jit.JITFunction):
        raise ExportError(f"{fn!r} is not a @triton.jit function")
    if config is not None:
        raise ExportError("config= is for @triton.autotune kernels")
    return fn, {}, {}


def compile_for(fn, params, args, constexprs, options, sample, target, divisible=None, ones=None, unaligned=None):
    """Compiles `fn` for the call `sample` with Triton's own binder (so its specialisation is the
    one `fn[grid](...)` would pick) and returns (compiled, signature {name: type},
    specialisation attrs by parameter name). `divisible`: integer parameters to compile as
    multiples of 16 (Triton's "D" key) whatever the sample's values; `ones`: integer parameters
    to compile as the constant 1, as Triton's JIT does for a call passing 1 (variants);
    `unaligned`: pointer parameters to compile without Triton's 16-byte alignment assumption (its
    key for a tensor whose address is not a multiple of 16)."""
    triton = compiler()
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    from triton.tools.tensor_descriptor import TensorDescriptor

    gpu_target = _gpu_target(target)
    backend = make_backend(gpu_target)
    by_name = {p.name: p for p in params}
    call = {}
    for kp in fn.params:
        if kp.is_constexpr:
            continue
        a = args[kp.name]
        if isinstance(a, Desc):
            t = by_name[a.tensor]
            base = _FakeTensor(t, sample)
            call[kp.name] = TensorDescriptor(base, base.shape, [evaluate(s, sample) for s in t.strides], a.block,
                                             a.padding)
        elif isinstance(by_name.get(a), Tensor):
            call[kp.name] = _FakeTensor(by_name[a], sample)
        elif isinstance(by_name.get(a), Scalar) and not by_name[a].integer:
            call[kp.name] = 1.5  # a float scalar: its value never specialises
        else:
            call[kp.name] = evaluate(a, sample)
    kwargs = dict(constexprs)
    kwargs.update(options)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or triton.knobs.runtime.debug
    kwargs["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    try:
        bound_args, specialization, opts = binder(**call, **kwargs)
        if divisible or ones or unaligned:
            specialization = [("constexpr", 1) if kp.name in (ones or ()) else (ty, "D") if kp.name in (divisible or ())
                              else (ty, "") if kp.name in (unaligned or ())
                              else spec for kp, spec, (ty, _) in zip(fn.params, specialization, specialization)]
            if ones:
                bound_args = dict(bound_args)  # the constant's value, as Triton's binder would bind it
                for name in ones:
                    bound_args[name] = 1
        opts, signature, consts, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, opts)
        compiled = triton.compile(ASTSource(fn, signature, consts, attrs), target=gpu_target, options=opts.__dict__)
    except ExportError:
        raise
    except Exception as e:
        where = f"sm_{target[0]}" if target else "the GPU here"
        raise ExportError(f"Triton could not compile {fn.__name__} for {where}: {type(e).__name__}: {e}") from e
    attrs_by_name = {fn.arg_names[path[0]]: value for path, value in attrs.items() if len(path) == 1}
    return compiled, signature, attrs_by_name


def ptx_target(ptx):
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    if not m:
        raise ExportError("the PTX has no .target directive")
    return m.group(1)


def ptxas_release(cc):
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        return get_ptxas(cc).version, get_ptxas(cc).path
    except Exception:  # older Triton: the version is not exposed
        return None, None

