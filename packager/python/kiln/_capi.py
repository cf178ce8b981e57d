"""libkiln's C ABI (include/kiln/kiln.h) as ctypes sees it: the enums (Status, Route, Dtype) and
what each value means here, the structs, every function's prototype, and the loading of libkiln
and of kiln._fastlaunch beside it. Nothing here decides what a call means: kiln/__init__.py does.

tests/test_capi_enums.py parses kiln.h and checks the enums here against it, name for name and
value for value, so a status, route or dtype added to the header must be added here too.
"""
import ctypes
import ctypes.util
import enum
import os
import sys

from . import _forks


class Status(enum.IntEnum):
    """kiln.h's kiln_status (KILN_OK is Status.OK, KILN_ERR_IO is Status.IO): what a libkiln call
    returned. An int (the C value); `.text` is the words a KilnError's message starts with."""
    OK = 0
    INVALID_ARGUMENT = 1
    IO = 2
    MALFORMED = 3
    INTEGRITY = 4
    SIGNATURE = 5
    MANIFEST = 6
    CODE_OBJECT = 7
    LIMIT = 8
    UNSUPPORTED = 9
    NOT_FOUND = 10
    REFUSED = 11
    DRIVER = 12
    REFERENCE_FAILED = 13
    BUFFER_TOO_SMALL = 14
    OUT_OF_MEMORY = 15
    INTERNAL = 16

    @property
    def text(self):
        return STATUS_TEXT[self]

    def __repr__(self):
        return f"Status.{self.name}"


# What a KilnError's message says first; tests and users match on these words, so they stay.
STATUS_TEXT = {
    Status.OK: "ok", Status.INVALID_ARGUMENT: "invalid argument", Status.IO: "I/O error",
    Status.MALFORMED: "malformed archive", Status.INTEGRITY: "integrity check failed",
    Status.SIGNATURE: "signature check failed", Status.MANIFEST: "invalid manifest",
    Status.CODE_OBJECT: "code object mismatch", Status.LIMIT: "limit exceeded", Status.UNSUPPORTED: "unsupported",
    Status.NOT_FOUND: "not found", Status.REFUSED: "refused", Status.DRIVER: "GPU driver error",
    Status.REFERENCE_FAILED: "reference failed", Status.BUFFER_TOO_SMALL: "buffer too small",
    Status.OUT_OF_MEMORY: "out of memory", Status.INTERNAL: "internal error",
}


class Route(enum.IntEnum):
    """kiln.h's kiln_route: how a call ran (KILN_ROUTE_PTX_JIT is Route.PTX_JIT)."""
    NATIVE = 1
    PTX_JIT = 2
    REFERENCE = 3
    REFUSED = 4


# kiln_route -> the word Kernel.route and a call's result give (kiln_route_string's)
ROUTE_WORDS = {Route.NATIVE: "native", Route.PTX_JIT: "ptx-jit", Route.REFERENCE: "reference",
               Route.REFUSED: "refused"}


class Dtype(enum.IntEnum):
    """kiln.h's kiln_dtype: a parameter's scalar type, or a pointer's element type. An int (the C
    value), shown by name: `k.params[0]["dtype"]` prints as Dtype.F32."""
    I8 = 1
    I16 = 2
    I32 = 3
    I64 = 4
    U8 = 5
    U16 = 6
    U32 = 7
    U64 = 8
    F16 = 9
    BF16 = 10
    F32 = 11
    F64 = 12
    F8E4M3 = 13
    F8E5M2 = 14

    def __repr__(self):
        return f"Dtype.{self.name}"


# kiln_dtype -> (ctypes type for a scalar's slot, element size, PyTorch dtype name)
DTYPES = {
    Dtype.I8: (ctypes.c_int8, 1, "int8"), Dtype.I16: (ctypes.c_int16, 2, "int16"),
    Dtype.I32: (ctypes.c_int32, 4, "int32"), Dtype.I64: (ctypes.c_int64, 8, "int64"),
    Dtype.U8: (ctypes.c_uint8, 1, "uint8"), Dtype.U16: (ctypes.c_uint16, 2, "uint16"),
    Dtype.U32: (ctypes.c_uint32, 4, "uint32"), Dtype.U64: (ctypes.c_uint64, 8, "uint64"),
    Dtype.F16: (ctypes.c_uint16, 2, "float16"), Dtype.BF16: (ctypes.c_uint16, 2, "bfloat16"),
    Dtype.F32: (ctypes.c_float, 4, "float32"), Dtype.F64: (ctypes.c_double, 8, "float64"),
    Dtype.F8E4M3: (ctypes.c_uint8, 1, "float8_e4m3fn"), Dtype.F8E5M2: (ctypes.c_uint8, 1, "float8_e5m2"),
}
# kiln_dtype -> the manifest's name for it (what k.params shows as "type")
DTYPE_NAMES = {Dtype.I8: "i8", Dtype.I16: "i16", Dtype.I32: "i32", Dtype.I64: "i64", Dtype.U8: "u8",
               Dtype.U16: "u16", Dtype.U32: "u32", Dtype.U64: "u64", Dtype.F16: "f16", Dtype.BF16: "bf16",
               Dtype.F32: "f32", Dtype.F64: "f64", Dtype.F8E4M3: "f8e4m3", Dtype.F8E5M2: "f8e5m2"}
# The narrow float kiln_dtypes -> (exponent bits, mantissa bits, IEEE-like): their scalars are passed
# as bits, rounded to nearest even (schema/MANIFEST.md); E4M3 has no infinities and one NaN code.
NARROW_FLOATS = {Dtype.F16: (5, 10, True), Dtype.BF16: (8, 7, True), Dtype.F8E4M3: (4, 3, False),
                 Dtype.F8E5M2: (5, 2, True)}
# kiln_dtype -> (lowest, highest) for the integer types
INT_BOUNDS = {Dtype.I8: (-2**7, 2**7 - 1), Dtype.I16: (-2**15, 2**15 - 1), Dtype.I32: (-2**31, 2**31 - 1),
              Dtype.I64: (-2**63, 2**63 - 1), Dtype.U8: (0, 2**8 - 1), Dtype.U16: (0, 2**16 - 1),
              Dtype.U32: (0, 2**32 - 1), Dtype.U64: (0, 2**64 - 1)}


class Options(ctypes.Structure):
    """kiln_runtime_options"""
    _fields_ = [("size", ctypes.c_uint32), ("signature_threshold", ctypes.c_uint32), ("trust_path", ctypes.c_char_p),
                ("policy", ctypes.c_uint32), ("log_level", ctypes.c_uint32), ("log_fn", ctypes.c_void_p),
                ("log_user", ctypes.c_void_p), ("max_member_size", ctypes.c_uint64),
                ("cuda_driver_path", ctypes.c_char_p), ("error_buffer", ctypes.c_char_p),
                ("error_buffer_size", ctypes.c_size_t), ("diag_dir", ctypes.c_char_p),
                ("hip_runtime_path", ctypes.c_char_p), ("attestation_trust_path", ctypes.c_char_p),
                ("attestation_threshold", ctypes.c_uint32)]


class CallInfo(ctypes.Structure):
    """kiln_call_info: what a reference is told about the call it serves"""
    _fields_ = [("size", ctypes.c_uint32), ("kernel", ctypes.c_char_p), ("device", ctypes.c_int),
                ("reason", ctypes.c_uint32), ("reason_text", ctypes.c_char_p), ("archive_digest", ctypes.c_char_p)]


class ParamInfo(ctypes.Structure):
    """kiln_param_info"""
    _fields_ = [("size", ctypes.c_uint32), ("is_pointer", ctypes.c_uint32), ("dtype", ctypes.c_uint32),
                ("access", ctypes.c_uint32), ("name", ctypes.c_char_p)]


# kiln_stats' counters, in the struct's order (Runtime.stats() returns them by these names)
STAT_FIELDS = ["archives_opened", "archive_open_failures", "loads", "load_failures", "load_time_ns", "jit_compiles",
               "jit_failures", "jit_time_ns", "launches_native", "launches_ptx_jit", "launches_reference",
               "launches_refused", "launch_failures", "undeclared_shape_calls"]


class Stats(ctypes.Structure):
    """kiln_stats"""
    _fields_ = [("size", ctypes.c_uint32), ("reserved", ctypes.c_uint32)] + [(f, ctypes.c_uint64) for f in STAT_FIELDS]


# kiln_reference_cb and kiln_release_fn
REFERENCE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(CallInfo), ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
RELEASE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _prototypes():
    """{function: (argument types, result type)} for every libkiln function the bindings call."""
    p, sz, st = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    return {
        "kiln_version": ([], ctypes.c_uint), "kiln_runtime_options_init": ([ctypes.POINTER(Options), sz], st),
        "kiln_runtime_create": ([ctypes.POINTER(p), ctypes.POINTER(Options)], st), "kiln_runtime_destroy": ([p], None),
        "kiln_runtime_last_error": ([p, ctypes.c_char_p, sz, ctypes.POINTER(sz)], st),
        "kiln_runtime_register_reference": ([p, ctypes.c_char_p, REFERENCE_FN, p], st),
        "kiln_runtime_set_reference": ([p, ctypes.c_char_p, REFERENCE_FN, p, RELEASE_FN], st),
        "kiln_call_set_error": ([p, ctypes.c_char_p], None),
        "kiln_archive_open": ([p, ctypes.c_char_p, ctypes.POINTER(p)], st),
        "kiln_archive_open_memory": ([p, ctypes.c_char_p, sz, ctypes.POINTER(p)], st),
        "kiln_archive_destroy": ([p], None), "kiln_archive_digest": ([p], ctypes.c_char_p),
        "kiln_archive_package": ([p], ctypes.c_char_p), "kiln_archive_revision": ([p], ctypes.c_char_p),
        "kiln_archive_sequence": ([p], ctypes.c_uint64), "kiln_archive_kernel_count": ([p], sz),
        "kiln_archive_kernel_name": ([p, sz], ctypes.c_char_p), "kiln_archive_warm": ([p, ctypes.c_int], st),
        "kiln_archive_get_kernel": ([p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(p)], st),
        "kiln_archive_preflight": ([p, ctypes.c_int, ctypes.c_char_p, sz, ctypes.POINTER(sz)], st),
        "kiln_archive_preflight_target": ([p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, sz, ctypes.POINTER(sz)], st),
        "kiln_archive_read_member": ([p, ctypes.c_char_p, p, sz, ctypes.POINTER(sz)], st),
        "kiln_archive_add_attestation": ([p, ctypes.c_char_p, sz], st),
        "kiln_kernel_route": ([p], st), "kiln_kernel_reason": ([p], st), "kiln_kernel_reason_text": ([p], ctypes.c_char_p),
        "kiln_kernel_target": ([p], ctypes.c_char_p), "kiln_kernel_name": ([p], ctypes.c_char_p), "kiln_reason_string": ([st], ctypes.c_char_p),
        "kiln_kernel_param_count": ([p], sz), "kiln_kernel_param": ([p, sz, ctypes.POINTER(ParamInfo)], st),
        "kiln_kernel_launch": ([p, ctypes.POINTER(ctypes.c_void_p), sz, p, ctypes.POINTER(st)], st),
        "kiln_kernel_explain": ([p, ctypes.POINTER(ctypes.c_void_p), sz, ctypes.c_char_p, sz, ctypes.POINTER(sz)], st),
        "kiln_runtime_stats": ([p, ctypes.POINTER(Stats)], st),
        "kiln_runtime_stats_prometheus": ([p, ctypes.c_char_p, sz, ctypes.POINTER(sz)], st),
    }


def _load():
    named = os.environ.get("KILN_LIBRARY")
    # The wheel carries libkiln inside the package (kiln/lib); a checkout or an installed tree
    # falls back to the loader's path.
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libkiln.so.0")
    path = named or (bundled if os.path.exists(bundled) else None) or ctypes.util.find_library("kiln") or "libkiln.so.0"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        from . import KilnError  # the package's face defines it; a load happens only after import kiln
        where = (f"KILN_LIBRARY names {named!r}, which could not be loaded" if named else
                 "libkiln.so.0 is not on the loader's path: install it (cmake --install build, then ldconfig) "
                 "or set KILN_LIBRARY to the library's path")
        raise KilnError(Status.IO, f"{where} ({e})") from None
    for name, (args, res) in _prototypes().items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


EXTENSION_PROTOCOL = 1  # packager/python/src/fastlaunch.c's KILN_FASTLAUNCH_PROTOCOL
_EXTENSION_FILE = "_fastlaunch.abi3.so"
_EXTENSION_MODULE = __package__ + "._fastlaunch"  # kiln._fastlaunch


def _load_extension(library_path):
    """(module, how it was found) for kiln._fastlaunch: the package's own copy (a wheel), else the
    one built beside the libkiln just loaded (the build folder's lib/, ci/gpu-build.sh's stage);
    (None, why not) where there is none, or it was built from another version of this file."""
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        return None, "the extension needs CPython 3.11 or later"
    import importlib
    import importlib.util
    try:
        module = importlib.import_module(_EXTENSION_MODULE)
        where = "in the package"
    except ModuleNotFoundError:
        beside = os.path.join(os.path.dirname(os.path.abspath(library_path)), _EXTENSION_FILE)
        if os.sep not in library_path or not os.path.exists(beside):  # a bare name: found by the loader
            return None, f"no {_EXTENSION_FILE} in the package or beside {library_path}"
        try:
            spec = importlib.util.spec_from_file_location(_EXTENSION_MODULE, beside)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (ImportError, OSError) as e:
            return None, f"{beside} could not be loaded: {e}"
        where = beside
    except ImportError as e:  # there, but not loadable (another platform, a libc too old)
        return None, f"kiln/{_EXTENSION_FILE} could not be loaded: {e}"
    if getattr(module, "PROTOCOL", None) != EXTENSION_PROTOCOL:
        return None, (f"{getattr(module, '__file__', where)} speaks protocol {getattr(module, 'PROTOCOL', None)}, "
                      f"this kiln/_capi.py {EXTENSION_PROTOCOL}: rebuild it")
    return module, where


def extension_disabled():
    return os.environ.get("KILN_PYTHON_NO_EXTENSION", "") not in ("", "0")


class Library:
    """libkiln, loaded at its first use rather than at import, so that `import kiln.export` (which
    needs no libkiln) works anywhere, and a missing library is reported by the call that needs it."""

    def __init__(self):
        self._lib, self._lock = None, _forks.Lock()

    def get(self):
        with self._lock:
            if self._lib is None:
                lib = _load()
                # The launch, called per kernel call, through a second function pointer to the same
                # symbol with no argtypes: every argument is passed as a prebuilt ctypes object
                # (handle, argument array, count, stream, route out), which ctypes hands to C as is
                # instead of converting each through argtypes' from_param on every call.
                launch = type(lib.kiln_kernel_launch)(("kiln_kernel_launch", lib))
                launch.restype = ctypes.c_int
                lib.raw_launch = launch
                lib.launch_address = ctypes.cast(lib.kiln_kernel_launch, ctypes.c_void_p).value
                lib.extension, lib.extension_status = _load_extension(lib._name)
                self._lib = lib
            return self._lib

    def __getattr__(self, name):
        return getattr(self.get(), name)


def text(raw):
    """libkiln's messages are UTF-8 but may quote a path that is not: never fail to say why."""
    return raw.decode("utf-8", "replace") if raw is not None else ""
