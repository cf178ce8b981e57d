"""Python bindings for libkiln, over its C ABI with ctypes.

    import kiln
    rt = kiln.Runtime(trust="keys/")                  # PEM key or folder of keys
    rt.register_reference("matmul_relu", torch_matmul_relu)
    archive = rt.open("matmul-relu.kiln")             # signatures checked here
    archive.warm(0)
    k = archive.kernel("matmul_relu", device=0)
    print(k.route, k.reason, k.reason_text)
    k(a, b, c, m, n, kk)                              # tensors or raw device pointers

A reference registered from Python receives the very objects the call was given (tensors
stay tensors) plus `info`, a dict saying why it runs.

A kernel call goes through kiln._fastlaunch, a small CPython extension (limited API, abi3) that
fills the argument array in C, where it was built: inside the package (the wheel), else beside
the libkiln that was loaded (a build folder's lib/, ci/gpu-build.sh's stage). Without it, or with
KILN_PYTHON_NO_EXTENSION=1 when the kernel is resolved, calls go through ctypes; both behave the
same (Kernel.launcher says which one a kernel uses).

kiln/_capi.py is the C side: kiln.h's enums (Status, Route, Dtype, all importable from here), its
structs and prototypes, and the loading of libkiln and kiln._fastlaunch. This file is what a call
means: the classes below.
"""
import ctypes
import math
import os
import sys
import threading

from . import _capi
from ._capi import DTYPE_NAMES, Dtype, Route, Status
from ._capi import DTYPES as _DTYPES, INT_BOUNDS as _INT_BOUNDS, NARROW_FLOATS as _NARROW_FLOATS
from ._capi import REFERENCE_FN as _REFERENCE_FN, RELEASE_FN as _RELEASE_FN, ROUTE_WORDS as _ROUTES
from ._capi import text as _text

__all__ = ["Runtime", "Archive", "Kernel", "KilnError", "Status", "Route", "Dtype", "library_version"]


def narrow_float_bits(dtype, value):
    """The bits of `value` rounded to nearest even in narrow float kiln_dtype `dtype` (f16, bf16,
    f8e4m3, f8e5m2); ValueError where it is not finite there (NaN, or past the largest finite)."""
    exponent, mantissa, ieee = _NARROW_FLOATS[dtype]
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{v} is not a finite number")
    bias = (1 << (exponent - 1)) - 1
    top_field = (1 << exponent) - (2 if ieee else 1)
    top_man = (1 << mantissa) - (1 if ieee else 2)
    sign = (1 << (exponent + mantissa)) if math.copysign(1.0, v) < 0 else 0
    a, min_exp = abs(v), 1 - bias
    if a < math.ldexp(1.0, min_exp):  # subnormal or zero; round() on a float rounds halves to even
        q = round(math.ldexp(a, mantissa - min_exp))
        field, man = (1, 0) if q >= 1 << mantissa else (0, q)
    else:
        e = math.frexp(a)[1] - 1
        q = round(math.ldexp(a, mantissa - e))
        if q >= 1 << (mantissa + 1):
            q, e = 1 << mantissa, e + 1
        field, man = e + bias, q - (1 << mantissa)
        if field > top_field or (field == top_field and man > top_man):
            raise ValueError(f"{v} is outside the {_DTYPES[dtype][2]} range")
    return sign | (field << mantissa) | man


def _address_of(value, name):
    """The address a pointer parameter gets for an array-like argument: CUDA arrays (CuPy, Numba:
    __cuda_array_interface__), NumPy arrays (host memory, for references), ctypes objects."""
    interface = getattr(value, "__cuda_array_interface__", None) or getattr(value, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    try:
        return ctypes.addressof(value)
    except TypeError:
        raise KilnError(Status.INVALID_ARGUMENT, f"argument '{name}' is a pointer: pass a tensor, an array (NumPy, "
                                                 f"CuPy), a ctypes object or an int address, not {type(value).__name__}") from None


class KilnError(RuntimeError):
    """A libkiln call failed; `status` is its kiln_status as a Status (a plain int where a newer
    libkiln returned a value this package does not know), the message says what and where."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            super().__init__(f"status {status}: {message}")
        else:
            super().__init__(f"{status.text}: {message}")
        self.status = status


# Registered references stay alive here until libkiln releases them (kiln_runtime_set_reference):
# a call in flight on another thread may still be running the one just replaced.
_registrations = {}
_registrations_lock = threading.Lock()
_next_token = [0]


@_RELEASE_FN
def _release(token):
    with _registrations_lock:
        _registrations.pop(token, None)


_lib = _capi.Library()
_call = threading.local()  # the Python arguments of the launch in progress on this thread


def library_version():
    v = _lib.kiln_version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


class Runtime:
    """Trust keys, policy, registered references and statistics; thread-safe."""

    def __init__(self, trust, *, threshold=1, strict=False, cuda_driver_path=None, attestations=None,
                 attestation_threshold=1):
        """`attestations` (a PEM key or folder of keys): kernels run only on the kinds of GPU an
        attestation signed by them covers (Archive.add_attestation; a store's for packages), and
        route as "unattested" elsewhere."""
        o = _capi.Options()
        _lib.kiln_runtime_options_init(ctypes.byref(o), ctypes.sizeof(o))
        self._trust = os.fsencode(trust)
        self._driver = os.fsencode(cuda_driver_path) if cuda_driver_path else None
        self._attestations = os.fsencode(attestations) if attestations else None
        o.trust_path, o.signature_threshold, o.policy, o.cuda_driver_path = self._trust, threshold, int(strict), self._driver
        o.attestation_trust_path, o.attestation_threshold = self._attestations, attestation_threshold
        error = ctypes.create_string_buffer(1024)
        o.error_buffer, o.error_buffer_size = ctypes.cast(error, ctypes.c_char_p), len(error)
        handle = ctypes.c_void_p()
        status = _lib.kiln_runtime_create(ctypes.byref(handle), ctypes.byref(o))
        if status:
            raise KilnError(status, _text(error.value))
        self._handle = handle
        self._references = set()  # kernels with a Python reference (the callbacks live in _registrations)

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.kiln_runtime_destroy(self._handle)
            self._handle = None

    def _check(self, status):
        if status:
            buf = ctypes.create_string_buffer(4096)
            _lib.kiln_runtime_last_error(self._handle, buf, len(buf), None)
            raise KilnError(status, _text(buf.value))

    def open(self, path):
        handle = ctypes.c_void_p()
        self._check(_lib.kiln_archive_open(self._handle, os.fsencode(path), ctypes.byref(handle)))
        return Archive(self, handle)

    def open_bytes(self, data):
        handle = ctypes.c_void_p()
        self._check(_lib.kiln_archive_open_memory(self._handle, bytes(data), len(data), ctypes.byref(handle)))
        return Archive(self, handle)

    def register_reference(self, kernel, fn):
        """fn(*args, info=dict) runs instead of `kernel` where no verified code object fits;
        it receives the launch's own arguments. fn=None removes it. Safe while other threads
        launch: a call already running the old reference finishes with it."""
        if fn is None:
            self._check(_lib.kiln_runtime_set_reference(self._handle, kernel.encode(), _REFERENCE_FN(), None,
                                                        _RELEASE_FN()))
            self._references.discard(kernel)
            return

        def trampoline(info_p, argv, argc, stream, user):
            call = getattr(_call, "args", None)
            info = info_p.contents
            if call is None:  # a launch from C code on this thread: no Python objects to hand over
                _lib.kiln_call_set_error(info_p, b"a Python reference can run only for a launch made from Python")
                return 2
            try:
                fn(*call, info={"kernel": _text(info.kernel), "device": info.device,
                                "reason": _text(_lib.kiln_reason_string(info.reason)),
                                "reason_text": _text(info.reason_text), "archive": _text(info.archive_digest),
                                "stream": stream})
                return 0
            except BaseException as e:  # kept and re-raised by the launch, after the C call returns
                _call.error = e
                _lib.kiln_call_set_error(info_p, f"{type(e).__name__}: {e}".encode("utf-8", "replace"))
                return 1

        callback = _REFERENCE_FN(trampoline)
        with _registrations_lock:
            _next_token[0] += 1
            token = _next_token[0]
            _registrations[token] = callback
        status = _lib.kiln_runtime_set_reference(self._handle, kernel.encode(), callback, token, _release)
        if status:
            with _registrations_lock:
                _registrations.pop(token, None)  # not registered: libkiln will not release it
            self._check(status)
        self._references.add(kernel)

    def stats(self):
        s = _capi.Stats()
        s.size = ctypes.sizeof(s)
        self._check(_lib.kiln_runtime_stats(self._handle, ctypes.byref(s)))
        return {f: getattr(s, f) for f in _capi.STAT_FIELDS}

    def prometheus(self):
        needed = ctypes.c_size_t()
        _lib.kiln_runtime_stats_prometheus(self._handle, None, 0, ctypes.byref(needed))
        buf = ctypes.create_string_buffer(needed.value)
        self._check(_lib.kiln_runtime_stats_prometheus(self._handle, buf, len(buf), None))
        return buf.value.decode()


class Archive:
    """An opened, authenticated archive; its kernels are resolved per device."""

    def __init__(self, runtime, handle):
        self._runtime, self._handle = runtime, handle

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.kiln_archive_destroy(self._handle)
            self._handle = None

    digest = property(lambda self: _lib.kiln_archive_digest(self._handle).decode())
    package = property(lambda self: _lib.kiln_archive_package(self._handle).decode())
    revision = property(lambda self: _lib.kiln_archive_revision(self._handle).decode())
    sequence = property(lambda self: _lib.kiln_archive_sequence(self._handle))

    @property
    def kernels(self):
        return [_lib.kiln_archive_kernel_name(self._handle, i).decode()
                for i in range(_lib.kiln_archive_kernel_count(self._handle))]

    def warm(self, device=0):
        self._runtime._check(_lib.kiln_archive_warm(self._handle, device))

    def add_attestation(self, envelope):
        """Gives the archive an attestation (the bytes `kiln verify --run --attest` writes), checked
        with the runtime's attestation keys; kernels resolved afterwards count it
        (kiln_archive_add_attestation). Raises KilnError saying why one is not taken."""
        data = bytes(envelope)
        self._runtime._check(_lib.kiln_archive_add_attestation(self._handle, data, len(data)))

    def read(self, path):
        """The content of member `path` as bytes, its digests checked against the signed index
        before any byte is returned (kiln_archive_read_member)."""
        size = ctypes.c_size_t()
        status = _lib.kiln_archive_read_member(self._handle, os.fsencode(path), None, 0, ctypes.byref(size))
        if status not in (Status.OK, Status.BUFFER_TOO_SMALL):
            self._runtime._check(status)
        buf = ctypes.create_string_buffer(max(size.value, 1))
        self._runtime._check(_lib.kiln_archive_read_member(self._handle, os.fsencode(path), buf, size.value, None))
        return buf.raw[:size.value]

    def preflight(self, device=0, target=None, driver=None):
        """Every kernel's route, reason and detail, as kiln_archive_preflight's JSON (a dict): for
        `device` here (code loaded, nothing launched), or, with `target` ("sm_90", "gfx942"), for a
        GPU described rather than present (kiln_archive_preflight_target: nothing loaded)."""
        import json
        needed = ctypes.c_size_t()

        def call(buf, cap, out):
            if target is None:
                return _lib.kiln_archive_preflight(self._handle, device, buf, cap, out)
            return _lib.kiln_archive_preflight_target(self._handle, target.encode(),
                                                      driver.encode() if driver else None, buf, cap, out)
        status = call(None, 0, ctypes.byref(needed))
        if status not in (Status.OK, Status.BUFFER_TOO_SMALL):
            self._runtime._check(status)
        buf = ctypes.create_string_buffer(needed.value)
        self._runtime._check(call(buf, len(buf), None))
        return json.loads(buf.value.decode())

    def kernel(self, name, device=0):
        handle = ctypes.c_void_p()
        self._runtime._check(_lib.kiln_archive_get_kernel(self._handle, name.encode(), device, ctypes.byref(handle)))
        try:
            return _kernel_class()(self, handle, device)
        except _NeedsPythonLauncher:
            return Kernel(self, handle, device)


class Kernel:
    """A kernel resolved for one device: call it with one argument per manifest parameter."""

    launcher = "ctypes"  # the per-call path: "extension" in _ExtensionKernel (kiln._fastlaunch)

    def __init__(self, archive, handle, device):
        self._archive, self._handle, self.device = archive, handle, device
        self.params = []
        for i in range(_lib.kiln_kernel_param_count(handle)):
            info = _capi.ParamInfo()
            info.size = ctypes.sizeof(info)
            _lib.kiln_kernel_param(handle, i, ctypes.byref(info))
            self.params.append({"name": info.name.decode(), "pointer": bool(info.is_pointer), "dtype": Dtype(info.dtype),
                                "type": DTYPE_NAMES.get(info.dtype, f"dtype {info.dtype}"),
                                "access": ("read", "write", "read_write")[info.access] if info.is_pointer else None})
        # One argument slot per parameter, made once: a call only stores values into them.
        self._slots = [ctypes.c_uint64() if p["pointer"] else _DTYPES[p["dtype"]][0]() for p in self.params]
        # f16, bf16 and fp8 scalars: a Python number rounded to the type's bits (None: stored as is).
        self._narrow = [None if p["pointer"] or p["dtype"] not in _NARROW_FLOATS else p["dtype"]
                        for p in self.params]
        self._argv = (ctypes.c_void_p * len(self._slots))(*[ctypes.addressof(s) for s in self._slots])
        self._raw_launch = _lib.get().raw_launch
        self._route_out = ctypes.c_int()
        self._route_ref = ctypes.byref(self._route_out)
        self._expected = None
        self._count = len(self.params)
        self._count_arg = ctypes.c_size_t(self._count)
        self._stream_arg = ctypes.c_void_p()
        self.name = _lib.kiln_kernel_name(handle).decode()
        self._references = archive._runtime._references  # Python references by kernel name
        self._plan = [(slot, p["pointer"], i) for i, (slot, p) in enumerate(zip(self._slots, self.params))]
        # An integer scalar out of its type's range would be cut to its low bits by ctypes while
        # a Python reference saw the whole value: refused instead.
        self._bounds = [None if p["pointer"] else _INT_BOUNDS.get(p["dtype"]) for p in self.params]

    route = property(lambda self: _ROUTES[_lib.kiln_kernel_route(self._handle)])
    reason = property(lambda self: _lib.kiln_reason_string(_lib.kiln_kernel_reason(self._handle)).decode())
    reason_text = property(lambda self: _lib.kiln_kernel_reason_text(self._handle).decode())
    target = property(lambda self: _lib.kiln_kernel_target(self._handle).decode())

    def _torch_types(self):
        # Resolved once, on the first call that passes a tensor: the expected torch dtype per
        # parameter and the fast raw-stream getter PyTorch's own launchers use.
        torch = sys.modules["torch"]
        self._expected = [getattr(torch, _DTYPES[p["dtype"]][2], None) for p in self.params]
        getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._current_stream = getter or (lambda device: torch.cuda.current_stream(device).cuda_stream)

    # What both paths do with what is not the common case (kiln._fastlaunch calls these too, so
    # that the two accept the same arguments and raise the same errors).
    def _wrong_count(self, args):
        params = self.params
        raise TypeError(f"kernel takes {len(params)} arguments ({', '.join(p['name'] for p in params)}), got {len(args)}")

    def _wrong_dtype(self, i, value):
        raise TypeError(f"argument '{self.params[i]['name']}' is {value.dtype}, the kernel expects "
                        f"{_DTYPES[self.params[i]['dtype']][2]}")

    def _address(self, i, value):
        """The address for a pointer argument that is neither a tensor nor an int."""
        return _address_of(value, self.params[i]["name"])

    def _convert(self, i, value):
        """What argument i's slot holds once `value` is stored in it: the range check, then ctypes'
        own conversion (a scalar that is not a plain int or float, a pointer given as an int subclass)."""
        bounds = self._bounds[i]
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            p = self.params[i]
            raise KilnError(Status.INVALID_ARGUMENT, f"argument '{p['name']}' is {_DTYPES[p['dtype']][2]}: {value} does not fit "
                               f"({bounds[0]} to {bounds[1]})")
        if self._narrow[i] is not None:
            value = self._narrow_bits(i, value)
        slot = type(self._slots[i])()
        slot.value = value
        return slot.value

    def _narrow_bits(self, i, value):
        p = self.params[i]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"argument '{p['name']}' is {_DTYPES[p['dtype']][2]}: pass a Python int or float, "
                            f"not {type(value).__name__}")
        try:
            return narrow_float_bits(p["dtype"], value)
        except ValueError as e:
            raise KilnError(Status.INVALID_ARGUMENT, f"argument '{p['name']}' is {_DTYPES[p['dtype']][2]}: {e}") from None

    @staticmethod
    def _stream_value(stream):
        arg = ctypes.c_void_p()
        arg.value = stream
        return arg.value or 0

    def _raise_status(self, status):
        self._archive._runtime._check(status)

    def __call__(self, *args, stream=None):
        if len(args) != self._count:
            self._wrong_count(args)
        cuda_device = -1
        expected = self._expected
        narrow = self._narrow
        # The hot path: one pass over prebuilt (slot, is_pointer, index) triples, no dict lookups.
        for (slot, is_pointer, i), value in zip(self._plan, args):
            if is_pointer:
                ptr = getattr(value, "data_ptr", None)
                if ptr is not None:  # a torch.Tensor
                    address = ptr()  # first, as kiln._fastlaunch does: its errors come before the dtype's
                    if expected is None:
                        self._torch_types()
                        expected = self._expected
                    if value.dtype is not expected[i]:
                        self._wrong_dtype(i, value)
                    if cuda_device < 0:
                        cuda_device = value.get_device()
                    slot.value = address
                elif isinstance(value, int):
                    slot.value = value
                else:
                    slot.value = self._address(i, value)
            else:
                bounds = self._bounds[i]
                if bounds is not None and not bounds[0] <= value <= bounds[1]:
                    self._convert(i, value)  # raises the range error
                if narrow[i] is not None:
                    value = self._narrow_bits(i, value)
                slot.value = value
        if stream is None and cuda_device >= 0:
            stream = self._current_stream(cuda_device)  # the caller's current CUDA stream
        stream_arg = self._stream_arg
        stream_arg.value = stream  # None is NULL: the default stream
        if self.name not in self._references:
            # No Python reference for this kernel: no Python objects to hand over.
            status = self._raw_launch(self._handle, self._argv, self._count_arg, stream_arg, self._route_ref)
        else:
            call = _call
            call.args = args
            try:
                status = self._raw_launch(self._handle, self._argv, self._count_arg, stream_arg, self._route_ref)
            finally:
                call.args = None
            error = getattr(call, "error", None)
            if error is not None:
                call.error = None
                raise error
        if status:
            self._archive._runtime._check(status)
        return _ROUTES[self._route_out.value]


    def explain(self, *args):
        """What a call with these arguments would do, launching nothing (kiln_kernel_explain): the
        shape and launch it gets, the route, and on a device the variant it takes and why the
        variants before it do not."""
        if len(args) != self._count:
            self._wrong_count(args)
        slots = [type(s)() for s in self._slots]  # its own: a launch on another thread keeps its slots
        for slot, (_, is_pointer, i), value in zip(slots, self._plan, args):
            if is_pointer:
                ptr = getattr(value, "data_ptr", None)
                slot.value = ptr() if ptr is not None else value if isinstance(value, int) else self._address(i, value)
            else:
                slot.value = self._convert(i, value)
        argv = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
        needed = ctypes.c_size_t()
        status = _lib.kiln_kernel_explain(self._handle, argv, len(slots), None, 0, ctypes.byref(needed))
        if status not in (Status.OK, Status.BUFFER_TOO_SMALL):
            self._raise_status(status)
        buf = ctypes.create_string_buffer(needed.value)
        self._raise_status(_lib.kiln_kernel_explain(self._handle, argv, len(slots), buf, len(buf), None))
        return buf.value.decode()


class _NeedsPythonLauncher(Exception):
    """A kernel kiln._fastlaunch cannot launch (a narrow float scalar): Kernel's own path does."""


_extension_kernel = [None]  # the class, made once the extension is loaded


def _kernel_class():
    """Kernel, or _ExtensionKernel where kiln._fastlaunch is there and not turned off."""
    lib = _lib.get()
    if lib.extension is None or _capi.extension_disabled():
        return Kernel
    if _extension_kernel[0] is None:
        class _ExtensionKernel(lib.extension.Launcher, Kernel):
            """Kernel whose calls run kiln._fastlaunch's C path (Launcher.__call__ comes first)."""

            launcher = "extension"

            def __init__(self, archive, handle, device):
                Kernel.__init__(self, archive, handle, device)
                if any(n is not None for n in self._narrow):
                    raise _NeedsPythonLauncher()  # the C path passes no f16, bf16 or fp8 scalar
                ext = _lib.get().extension
                spec = []
                for p in self.params:
                    if p["pointer"]:
                        spec.append((ext.KIND_POINTER, 8, 0, 0))
                    elif p["dtype"] in (Dtype.F32, Dtype.F64):
                        spec.append((ext.KIND_FLOAT, _DTYPES[p["dtype"]][1], 0, 0))
                    else:
                        lo, hi = _INT_BOUNDS[p["dtype"]]
                        spec.append((ext.KIND_SIGNED if lo < 0 else ext.KIND_UNSIGNED, _DTYPES[p["dtype"]][1], lo, hi))
                routes = tuple(_ROUTES.get(r) for r in range(max(_ROUTES) + 1))
                self._launch_spec = (_lib.get().launch_address, self._handle.value or 0, tuple(spec),
                                     self._references, self.name, _call, routes)
                self._setup(*self._launch_spec)

        _ExtensionKernel.__name__ = _ExtensionKernel.__qualname__ = "Kernel"
        _extension_kernel[0] = _ExtensionKernel
    return _extension_kernel[0]
