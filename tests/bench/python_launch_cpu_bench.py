#!/usr/bin/env python3
"""The Python side of a kernel call, without a GPU: kiln.Kernel(...) through kiln._fastlaunch (the
C extension) against the ctypes path, same kernel, same arguments, same run.
    python_launch_cpu_bench.py ARCHIVE TRUSTED_KEY     (ARCHIVE: the test build's scale.kiln)
with KILN_LIBRARY naming a libkiln whose folder holds _fastlaunch.abi3.so (a build's lib/), and
PYTHONPATH=packager/python. Compiles a two-function stub with cc (no libkiln, no Python in it):

  stub:   the kernel's launch function is replaced by the stub's `int launch(...) { return 0; }`:
          only the Python side of a call is timed (argument checks, the array, the foreign call)
  libkiln: the real kiln_kernel_launch on its reference route (no driver) to a C reference that
          does nothing: libkiln's own dispatch added (on the GPU, cuLaunchKernel is there instead)

Arguments: scale(y, x, a, n), y and x as raw int addresses (the cost of a tensor's data_ptr(),
dtype and get_device() and of the current-stream getter is PyTorch's and is not here), and as
FakeTensor objects written in Python (which overstates those, Python methods being slower than
PyTorch's C ones). Per-call time of 20,000 calls, 9 repetitions, paths interleaved: the minimum
(the figure least disturbed by other work on a shared machine) and the median."""
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import kiln

STUB = r"""
#include <stddef.h>
int launch(void* k, void* const* a, size_t n, void* s, int* route) { if (route) *route = 3; return 0; }
int reference(void* info, void** argv, size_t argc, void* stream, void* user) { return 0; }
"""


def stub_library():
    folder = tempfile.mkdtemp(prefix="kiln-launch-stub-")
    src, lib = os.path.join(folder, "stub.c"), os.path.join(folder, "stub.so")
    with open(src, "w") as f:
        f.write(STUB)
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", src, "-o", lib], check=True)
    return ctypes.CDLL(lib)


class FakeTensor:
    def __init__(self, dtype, address):
        self.dtype, self._address = dtype, address

    def get_device(self):
        return 0

    def data_ptr(self):
        return self._address


def per_call_us(fn, args, calls=20000, reps=9):
    fn(*args)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return min(samples), statistics.median(samples)


def main():
    archive_path, key = sys.argv[1], sys.argv[2]
    stub = stub_library()
    rt = kiln.Runtime(key, cuda_driver_path="libcuda-absent-for-this-bench.so.1")
    noop = ctypes.cast(stub.reference, kiln._REFERENCE_FN)  # a C reference: no Python in the launch
    assert kiln._lib.kiln_runtime_set_reference(rt._handle, b"scale", noop, None, kiln._RELEASE_FN()) == 0
    archive = rt.open(archive_path)
    os.environ["KILN_PYTHON_NO_EXTENSION"] = "1"
    by_ctypes = archive.kernel("scale")
    del os.environ["KILN_PYTHON_NO_EXTENSION"]
    by_extension = archive.kernel("scale")
    if by_extension.launcher != "extension":
        sys.exit(f"kiln._fastlaunch is not loaded: {kiln._lib.get().extension_status}")
    torch = types.ModuleType("torch")  # what the call path reads of torch, for FakeTensor
    torch.float32 = object()
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    sys.modules["torch"] = torch
    y, x = (ctypes.c_float * 16)(), (ctypes.c_float * 16)()
    raw = (ctypes.addressof(y), ctypes.addressof(x), 2.5, 16)
    fake = (FakeTensor(torch.float32, raw[0]), FakeTensor(torch.float32, raw[1]), 2.5, 16)
    assert by_ctypes(*raw) == by_extension(*raw) == "reference"

    results = {}
    for _ in range(2):  # interleaved twice; the second round is kept
        for label, args in (("int addresses", raw), ("FakeTensor", fake)):
            results["libkiln", label, "ctypes"] = per_call_us(by_ctypes, args)
            results["libkiln", label, "extension"] = per_call_us(by_extension, args)
    # The stub in place of kiln_kernel_launch: the Python side alone.
    stub_address = ctypes.cast(stub.launch, ctypes.c_void_p).value
    by_extension._setup(stub_address, *by_extension._launch_spec[1:])
    stub.launch.restype = ctypes.c_int
    by_ctypes._raw_launch = stub.launch
    for _ in range(2):
        for label, args in (("int addresses", raw), ("FakeTensor", fake)):
            results["stub", label, "ctypes"] = per_call_us(by_ctypes, args)
            results["stub", label, "extension"] = per_call_us(by_extension, args)

    print(f"\nkiln.Kernel(...) per call without a GPU (Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores), scale(y, x, a, n)")
    print(f"{'launch fn':9} {'pointer args':14} {'ctypes us (median)':>19} {'extension us (median)':>22} {'ratio':>6}")
    for where in ("stub", "libkiln"):
        for label in ("int addresses", "FakeTensor"):
            (c, cm), (e, em) = results[where, label, "ctypes"], results[where, label, "extension"]
            print(f"{where:9} {label:14} {c:9.3f} ({cm:7.3f}) {e:12.3f} ({em:7.3f}) {e / c:6.2f}")


if __name__ == "__main__":
    main()
