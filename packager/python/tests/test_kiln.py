"""pytest for the Python bindings. Here (no GPU) every call takes the reference route; on the
H200 (ci/gpu-run.sh) the native route is checked against PyTorch."""
import ctypes
import os
import random

import pytest

import kiln

ARCHIVES = os.environ["KILN_TEST_ARCHIVES"]
TRUST = os.path.join(os.environ["KILN_TEST_KEYS"], "test.pub")
NO_DRIVER = "libcuda-absent-for-this-test.so.1"


def cpu_matmul_relu(a, b, m, n, k):
    return [max(0.0, sum(a[i * k + p] * b[p * n + j] for p in range(k))) for i in range(m) for j in range(n)]


def test_open_and_describe():
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    archive = rt.open(os.path.join(ARCHIVES, "scale.kiln"))
    assert archive.digest.startswith("sha256:")
    assert (archive.package, archive.revision, archive.sequence) == ("scale", "test-1", 4)
    assert archive.kernels == ["scale", "scale_strict"]
    with open(os.path.join(ARCHIVES, "scale.kiln"), "rb") as f:
        assert rt.open_bytes(f.read()).digest == archive.digest
    k = archive.kernel("scale")
    assert [p["name"] for p in k.params] == ["y", "x", "a", "n"]
    assert (k.route, k.reason) == ("reference", "no-driver")
    assert NO_DRIVER in k.reason_text


def test_params_show_their_dtypes_by_name_and_compare_as_kiln_h_values():
    k = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER).open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    y, _, a, n = k.params
    assert repr(y["dtype"]) == "Dtype.F32" and "Dtype.F32" in repr(k.params)
    assert y["dtype"] is kiln.Dtype.F32 and y["dtype"] == 11 and n["dtype"] == kiln.Dtype.U32 == 7
    assert (y["type"], a["type"], n["type"]) == ("f32", "f32", "u32")


def test_attestations_are_taken_only_by_a_runtime_that_requires_them_and_only_when_they_verify():
    plain = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER).open(os.path.join(ARCHIVES, "scale.kiln"))
    with pytest.raises(kiln.KilnError, match="requires no attestations"):
        plain.add_attestation(b"{}")
    # The test key doubles as the attestation key here; these bytes are no envelope at all.
    strict = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER, attestations=TRUST).open(os.path.join(ARCHIVES, "scale.kiln"))
    with pytest.raises(kiln.KilnError, match="the attestation given"):
        strict.add_attestation(b'{"payloadType": "x"}')
    with pytest.raises(kiln.KilnError, match="attestation_threshold must be 1 to 64, not 65"):
        kiln.Runtime(TRUST, attestations=TRUST, attestation_threshold=65)


def test_reference_receives_the_python_objects_and_runs(launcher):
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    seen = []

    def scale_reference(y, x, a, n, info):
        seen.append(info)
        for i in range(n):
            y[i] = a * x[i]

    rt.register_reference("scale", scale_reference)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    n = 1024
    x = (ctypes.c_float * n)(*[random.uniform(-1, 1) for _ in range(n)])
    y = (ctypes.c_float * n)()
    assert k(y, x, 2.5, n) == "reference"
    assert list(y) == [ctypes.c_float(2.5 * v).value for v in x]
    assert seen[0]["reason"] == "no-driver" and seen[0]["kernel"] == "scale"
    assert rt.stats()["launches_reference"] == 1
    assert 'kiln_launches_total{route="reference"} 1' in rt.prometheus()


def test_errors_are_raised_with_their_message(launcher):
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    with pytest.raises(kiln.KilnError, match="signature check failed"):
        data = bytearray(open(os.path.join(ARCHIVES, "scale.kiln"), "rb").read())
        index_offset = int.from_bytes(data[16:24], "little")  # FORMAT.md §2
        data[index_offset + 30] ^= 1  # a byte of the index head, which the signature covers
        rt.open_bytes(bytes(data))
    with pytest.raises(kiln.KilnError, match="I/O error: .*missing.kiln"):
        rt.open("missing.kiln")
    with pytest.raises(kiln.KilnError, match="no reference is registered"):
        k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
        assert k.launcher == launcher
        x = (ctypes.c_float * 4)()
        k(x, x, 1.0, 4)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k(1, 2)
    with pytest.raises(kiln.KilnError, match="trust"):
        kiln.Runtime("/nonexistent/key.pub")


def test_an_exception_in_the_reference_propagates(launcher):
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)

    def broken(*args, info):
        raise ValueError("the reference itself failed")

    rt.register_reference("scale", broken)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    x = (ctypes.c_float * 4)()
    with pytest.raises(ValueError, match="the reference itself failed"):
        k(x, x, 1.0, 4)


def test_matmul_archive_routes_to_the_reference_without_a_gpu(launcher):
    path = os.path.join(ARCHIVES, "matmul-relu.kiln")
    if not os.path.exists(path):
        pytest.skip("matmul-relu.kiln needs nvcc at build time")
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    rt.register_reference("matmul_relu", lambda a, b, c, m, n, k, info: c.__setitem__(
        slice(0, m * n), cpu_matmul_relu(a, b, m, n, k)))
    kernel = rt.open(path).kernel("matmul_relu")
    assert kernel.launcher == launcher
    m = n = kk = 16
    a = (ctypes.c_float * (m * kk))(*[random.uniform(-1, 1) for _ in range(m * kk)])
    b = (ctypes.c_float * (kk * n))(*[random.uniform(-1, 1) for _ in range(kk * n)])
    c = (ctypes.c_float * (m * n))()
    assert kernel(a, b, c, m, n, kk) == "reference"
    want = cpu_matmul_relu(list(a), list(b), m, n, kk)
    assert max(abs(x - y) for x, y in zip(c, want)) < 1e-5


try:
    import torch
except ImportError:  # the CPU machines have no PyTorch; the GPU machine has 2.11
    torch = None


@pytest.mark.gpu
@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs PyTorch and a CUDA GPU")
def test_native_route_matches_pytorch(launcher):
    rt = kiln.Runtime(TRUST)
    kernel = rt.open(os.path.join(ARCHIVES, "matmul-relu.kiln")).kernel("matmul_relu")
    assert kernel.launcher == launcher
    assert kernel.route == "native", kernel.reason_text
    m = n = kk = 1024
    a = torch.rand(m, kk, device="cuda") * 2 - 1
    b = torch.rand(kk, n, device="cuda") * 2 - 1
    c = torch.full((m, n), float("nan"), device="cuda")
    assert kernel(a, b, c, m, n, kk) == "native"
    torch.cuda.synchronize()
    want = torch.relu(a.double() @ b.double())
    assert not torch.isnan(c).any()
    assert (c.double() - want).abs().max().item() < 1e-3


def test_a_missing_library_is_a_kiln_error_naming_kiln_library():
    import subprocess
    import sys
    env = dict(os.environ, KILN_LIBRARY="/nonexistent/libkiln.so.0")
    # import kiln (and kiln.export) needs no libkiln; the first call that does says what is wrong
    r = subprocess.run([sys.executable, "-c", "import kiln, kiln.export; print('imported'); kiln.Runtime('x')"],
                       env=env, capture_output=True, text=True)
    assert r.returncode != 0 and r.stdout == "imported\n"
    assert "KilnError" in r.stderr and "KILN_LIBRARY names '/nonexistent/libkiln.so.0'" in r.stderr, r.stderr


def test_a_path_that_is_not_utf8_fails_as_a_kiln_error():
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    with pytest.raises(kiln.KilnError, match="I/O error"):
        rt.open(b"/nonexistent/\xff\xfe.kiln")


def test_numpy_arrays_are_accepted_and_reach_the_reference_as_themselves(launcher):
    np = pytest.importorskip("numpy")
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)

    def scale_reference(y, x, a, n, info):
        assert isinstance(y, np.ndarray)
        y[:n] = a * x[:n]

    rt.register_reference("scale", scale_reference)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    x = np.arange(1024, dtype=np.float32)
    y = np.zeros(1024, dtype=np.float32)
    assert k(y, x, 0.5, 1024) == "reference"
    assert np.array_equal(y, x * np.float32(0.5))
    with pytest.raises(kiln.KilnError, match="argument 'y' is a pointer: pass a tensor, an array"):
        k("not an array", x, 0.5, 1024)


def test_an_integer_out_of_its_parameters_range_is_refused_not_truncated(launcher):
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    calls = []
    rt.register_reference("scale", lambda y, x, a, n, info: calls.append(n))
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    y, x = (ctypes.c_float * 4)(), (ctypes.c_float * 4)()
    with pytest.raises(kiln.KilnError, match=r"argument 'n' is uint32: 4294967299 does not fit \(0 to 4294967295\)"):
        k(y, x, 1.0, 2**32 + 3)
    with pytest.raises(kiln.KilnError, match="does not fit"):
        k(y, x, 1.0, -1)
    assert calls == []


def test_replacing_a_reference_while_threads_launch_is_safe(launcher):
    import threading
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    before = set(kiln._registrations)  # other tests' runtimes may still be alive with theirs
    rt.register_reference("scale", lambda y, x, a, n, info: None)
    errors, stop = [], threading.Event()

    def launcher():
        y, x = (ctypes.c_float * 4)(), (ctypes.c_float * 4)()
        try:
            while not stop.is_set():
                k(y, x, 1.0, 1024)
        except BaseException as e:  # pragma: no cover - the failure being tested for
            errors.append(e)

    threads = [threading.Thread(target=launcher) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(300):
        rt.register_reference("scale", lambda y, x, a, n, info, i=i: None)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    rt.register_reference("scale", None)
    assert set(kiln._registrations) <= before, "every reference this test registered was released"


@pytest.mark.skipif(not os.environ.get("KILN_EXPECT_INSTALLED_WHEEL"), reason="only for the installed wheel (ctest python_wheel)")
def test_the_installed_wheel_carries_libkiln_and_the_command():
    package = os.path.dirname(os.path.abspath(kiln.__file__))
    assert "site-packages" in package, package
    assert kiln.library_version().startswith("0.")
    assert kiln._lib.get()._name == os.path.join(package, "lib", "libkiln.so.0")  # the bundled one was loaded
    if os.environ.get("KILN_TEST_EXPECT_EXTENSION"):  # kiln._fastlaunch, inside the package
        assert kiln._lib.get().extension_status == "in the package", kiln._lib.get().extension_status
    cli = os.environ["KILN_CLI"]
    import subprocess
    out = subprocess.run([cli, "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "kiln" in out.stdout


# ---- The two call paths (kiln._fastlaunch and ctypes) against each other: what libkiln receives.

def capture_launches(rt, name, sizes):
    """Registers a reference at the C level (not through register_reference, so the launch takes
    the path a native launch takes) that records what libkiln was handed: each argument's bytes as
    stored in the argument array (sizes: one byte count per parameter), and the stream."""
    seen = []

    def reference(info_p, argv, argc, stream, user):
        seen.append((tuple(ctypes.string_at(argv[i], size).hex() for i, size in enumerate(sizes)), stream))
        return 0

    callback = kiln._capi.REFERENCE_FN(reference)
    assert kiln._lib.kiln_runtime_set_reference(rt._handle, name.encode(), callback, None, kiln._capi.RELEASE_FN()) == 0
    return seen, callback


def outcome(kernel, seen, args, kwargs):
    del seen[:]
    try:
        route = kernel(*args, **kwargs)
    except Exception as e:
        return ("raised", type(e), str(e))
    return ("ran", route, list(seen))


def both_paths(monkeypatch, archive_name, kernel_name):
    """(runtime, kernel through ctypes, kernel through the extension, what the launches were handed)"""
    path = os.path.join(ARCHIVES, archive_name)
    if not os.path.exists(path):
        pytest.skip(f"{archive_name} is not in this build")
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    archive = rt.open(path)
    monkeypatch.setenv("KILN_PYTHON_NO_EXTENSION", "1")
    by_ctypes = archive.kernel(kernel_name)
    monkeypatch.delenv("KILN_PYTHON_NO_EXTENSION")
    by_extension = archive.kernel(kernel_name)
    assert by_ctypes.launcher == "ctypes"
    if by_extension.launcher != "extension":
        if os.environ.get("KILN_TEST_EXPECT_EXTENSION"):
            pytest.fail(f"kiln._fastlaunch is not loaded: {kiln._lib.get().extension_status}")
        pytest.skip(f"no kiln._fastlaunch: {kiln._lib.get().extension_status}")
    sizes = [8 if p["pointer"] else kiln._capi.DTYPES[p["dtype"]][1] for p in by_ctypes.params]
    seen, keep = capture_launches(rt, kernel_name, sizes)
    return rt, by_ctypes, by_extension, seen, keep


def assert_same_outcomes(by_ctypes, by_extension, seen, cases):
    for args, kwargs in cases:
        want = outcome(by_ctypes, seen, args, kwargs)
        got = outcome(by_extension, seen, args, kwargs)
        assert got == want, (args, kwargs)


class IntLike(int):
    pass


def test_both_paths_hand_libkiln_the_same_arguments_and_raise_the_same_errors(monkeypatch):
    np = pytest.importorskip("numpy")
    rt, by_ctypes, by_extension, seen, keep = both_paths(monkeypatch, "scale.kiln", "scale")  # y, x, a: f32, n: u32
    y, x = (ctypes.c_float * 4)(), np.zeros(4, dtype=np.float32)
    assert_same_outcomes(by_ctypes, by_extension, seen, [
        ((y, x, 2.5, 4), {}), ((y, x, 2, 4), {}), ((y, x, True, 4), {}), ((y, x, 2.5, True), {}),
        ((y, x, 1e300, 4), {}), ((y, x, -0.0, 0), {}), ((y, x, float("nan"), 4294967295), {}),
        ((y, x, 2**200, 4), {}), ((y, x, 2**2000, 4), {}), ((y, x, IntLike(3), IntLike(4)), {}),
        ((y, x, np.float32(0.1), np.uint32(7)), {}), ((y, x, 0.1, np.int64(9)), {}),
        ((0x1000, 2**64 - 1, 1.0, 1), {}), ((-1, IntLike(5), 1.0, 1), {}), ((2**64 + 7, 0, 1.0, 1), {}),
        ((y, x, 2.5, 4), {"stream": 1234}), ((y, x, 2.5, 4), {"stream": -1}), ((y, x, 2.5, 4), {"stream": 2**64 + 5}),
        ((y, x, 2.5, 4), {"stream": "default"}), ((y, x, 2.5, 4), {"stream": 1.5}), ((y, x, 2.5, 4), {"strm": None}),
        ((y, x, 2.5, -1), {}), ((y, x, 2.5, 2**32), {}), ((y, x, 2.5, 2**70), {}), ((y, x, 2.5, -(2**70)), {}),
        ((y, x, 2.5, 4.0), {}), ((y, x, "2.5", 4), {}), ((y, x, 2.5, "4"), {}), ((y, x, None, 4), {}),
        ((y, "x", 2.5, 4), {}), ((y, None, 2.5, 4), {}), ((y, 1.5, 2.5, 4), {}), ((y, x, 2.5), {}), ((), {}),
        ((y, x, 2.5, 4, 5), {}),
    ])
    assert outcome(by_extension, seen, (y, x, 2.5, 4), {})[0] == "ran"
    assert outcome(by_extension, seen, (y, x, 2.5, -1), {})[0] == "raised"


def test_both_paths_agree_on_signed_scalars(monkeypatch):
    rt, by_ctypes, by_extension, seen, keep = both_paths(monkeypatch, "matmul-relu.kiln", "matmul_relu")  # m, n, k: i32
    a = (ctypes.c_float * 4)()
    assert_same_outcomes(by_ctypes, by_extension, seen, [
        ((a, a, a, m, 2, 3), {}) for m in (0, 1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63, -(2**63) - 1,
                                          2**64, True, IntLike(-7), 7.0, "7", None)])


def test_a_kernel_without_parameters_is_called_alike(monkeypatch):
    rt, by_ctypes, by_extension, seen, keep = both_paths(monkeypatch, "table-edges.kiln", "Alpha")
    assert_same_outcomes(by_ctypes, by_extension, seen, [((), {}), ((1,), {}), ((), {"stream": 9})])


class FakeTensor:
    """What the call path reads of a torch.Tensor: dtype, get_device(), data_ptr()."""

    def __init__(self, dtype, address, device):
        self.dtype, self._address, self._device = dtype, address, device

    def get_device(self):
        return self._device

    def data_ptr(self):
        return self._address


def test_tensors_give_their_data_ptr_and_the_current_stream_of_their_device(launcher, monkeypatch):
    import sys
    import types
    fake = types.ModuleType("torch")
    fake.float32, fake.float64, fake.int32 = object(), object(), object()
    streams = []
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: streams.append(device) or 0x5000 + device)
    monkeypatch.setitem(sys.modules, "torch", fake)
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    seen, keep = capture_launches(rt, "scale", [8, 8, 4, 4])
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    y, x = FakeTensor(fake.float32, 0x1000, 2), FakeTensor(fake.float32, 0x2000, 3)
    assert k(y, x, 0.5, 8) == "reference"
    args = lambda p, q: (p.to_bytes(8, "little").hex(), q.to_bytes(8, "little").hex(),  # noqa: E731
                         bytes(ctypes.c_float(0.5)).hex(), (8).to_bytes(4, "little").hex())
    assert seen == [(args(0x1000, 0x2000), 0x5002)] and streams == [2]  # the first tensor's device
    assert k(y, x, 0.5, 8, stream=77) == "reference" and seen[-1][1] == 77 and streams == [2]
    cpu = FakeTensor(fake.float32, 0x3000, -1)
    assert k(cpu, 0x4000, 0.5, 8) == "reference" and seen[-1] == (args(0x3000, 0x4000), None)
    with pytest.raises(TypeError, match="argument 'x' is <object object at .*>, the kernel expects float32"):
        k(y, FakeTensor(fake.float64, 0x2000, 3), 0.5, 8)


class TensorWithoutData(FakeTensor):
    """A tensor whose data_ptr() raises, as a meta tensor's does."""

    def __init__(self, dtype, error):
        super().__init__(dtype, 0, 0)
        self._error = error

    def data_ptr(self):
        raise self._error


def test_an_error_from_data_ptr_reaches_the_caller_before_the_dtype_check(launcher, monkeypatch):
    import sys
    import types
    fake = types.ModuleType("torch")
    fake.float32, fake.float64, fake.int32 = object(), object(), object()
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    monkeypatch.setitem(sys.modules, "torch", fake)
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    seen, keep = capture_launches(rt, "scale", [8, 8, 4, 4])
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    assert k.launcher == launcher
    y = FakeTensor(fake.float32, 0x1000, 0)
    # Raised inside data_ptr(), an AttributeError is the caller's too, not a sign of "no tensor".
    for error in (RuntimeError("no storage"), AttributeError("no storage here")):
        for dtype in (fake.float32, fake.float64):
            with pytest.raises(type(error), match="^no storage"):
                k(y, TensorWithoutData(dtype, error), 0.5, 8)
    assert seen == []


def test_the_environment_variable_turns_the_extension_off():
    import subprocess
    import sys
    code = ("import kiln, os; rt = kiln.Runtime(os.path.join(os.environ['KILN_TEST_KEYS'], 'test.pub'), "
            "cuda_driver_path='x'); print(rt.open(os.path.join(os.environ['KILN_TEST_ARCHIVES'], 'scale.kiln'))"
            ".kernel('scale').launcher)")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, KILN_PYTHON_NO_EXTENSION="1"),
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "ctypes\n", r.stderr
