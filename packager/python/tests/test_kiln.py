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


def test_reference_receives_the_python_objects_and_runs():
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    seen = []

    def scale_reference(y, x, a, n, info):
        seen.append(info)
        for i in range(n):
            y[i] = a * x[i]

    rt.register_reference("scale", scale_reference)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    n = 1024
    x = (ctypes.c_float * n)(*[random.uniform(-1, 1) for _ in range(n)])
    y = (ctypes.c_float * n)()
    assert k(y, x, 2.5, n) == "reference"
    assert list(y) == [ctypes.c_float(2.5 * v).value for v in x]
    assert seen[0]["reason"] == "no-driver" and seen[0]["kernel"] == "scale"
    assert rt.stats()["launches_reference"] == 1
    assert 'kiln_launches_total{route="reference"} 1' in rt.prometheus()


def test_errors_are_raised_with_their_message():
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
        x = (ctypes.c_float * 4)()
        k(x, x, 1.0, 4)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k(1, 2)
    with pytest.raises(kiln.KilnError, match="trust"):
        kiln.Runtime("/nonexistent/key.pub")


def test_an_exception_in_the_reference_propagates():
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)

    def broken(*args, info):
        raise ValueError("the reference itself failed")

    rt.register_reference("scale", broken)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    x = (ctypes.c_float * 4)()
    with pytest.raises(ValueError, match="the reference itself failed"):
        k(x, x, 1.0, 4)


def test_matmul_archive_routes_to_the_reference_without_a_gpu():
    path = os.path.join(ARCHIVES, "matmul-relu.kiln")
    if not os.path.exists(path):
        pytest.skip("matmul-relu.kiln needs nvcc at build time")
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    rt.register_reference("matmul_relu", lambda a, b, c, m, n, k, info: c.__setitem__(
        slice(0, m * n), cpu_matmul_relu(a, b, m, n, k)))
    kernel = rt.open(path).kernel("matmul_relu")
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
def test_native_route_matches_pytorch():
    rt = kiln.Runtime(TRUST)
    kernel = rt.open(os.path.join(ARCHIVES, "matmul-relu.kiln")).kernel("matmul_relu")
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


def test_numpy_arrays_are_accepted_and_reach_the_reference_as_themselves():
    np = pytest.importorskip("numpy")
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)

    def scale_reference(y, x, a, n, info):
        assert isinstance(y, np.ndarray)
        y[:n] = a * x[:n]

    rt.register_reference("scale", scale_reference)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    x = np.arange(1024, dtype=np.float32)
    y = np.zeros(1024, dtype=np.float32)
    assert k(y, x, 0.5, 1024) == "reference"
    assert np.array_equal(y, x * np.float32(0.5))
    with pytest.raises(kiln.KilnError, match="argument 'y' is a pointer: pass a tensor, an array"):
        k("not an array", x, 0.5, 1024)


def test_an_integer_out_of_its_parameters_range_is_refused_not_truncated():
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    calls = []
    rt.register_reference("scale", lambda y, x, a, n, info: calls.append(n))
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
    y, x = (ctypes.c_float * 4)(), (ctypes.c_float * 4)()
    with pytest.raises(kiln.KilnError, match=r"argument 'n' is uint32: 4294967299 does not fit \(0 to 4294967295\)"):
        k(y, x, 1.0, 2**32 + 3)
    with pytest.raises(kiln.KilnError, match="does not fit"):
        k(y, x, 1.0, -1)
    assert calls == []


def test_replacing_a_reference_while_threads_launch_is_safe():
    import threading
    rt = kiln.Runtime(TRUST, cuda_driver_path=NO_DRIVER)
    k = rt.open(os.path.join(ARCHIVES, "scale.kiln")).kernel("scale")
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
    cli = os.environ["KILN_CLI"]
    import subprocess
    out = subprocess.run([cli, "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "kiln" in out.stdout
