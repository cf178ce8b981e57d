"""pytest hooks for the bindings' tests.

Tests that need a CUDA GPU carry the `gpu` marker. ctest runs them apart from the others
(tests/CMakeLists.txt: python_bindings_gpu, `-m gpu`) with KILN_PYTEST_ALL_SKIPPED_EXIT set:
when every test it selected was skipped (no GPU, no PyTorch), the run exits with that code
instead of 0, and ctest's SKIP_RETURN_CODE lists it as skipped rather than passed.

The `launcher` fixture runs a test once per call path of kiln.Kernel: "extension" (the C path,
kiln._fastlaunch) and "ctypes" (KILN_PYTHON_NO_EXTENSION=1). Where the extension is missing its
runs are skipped, or fail where KILN_TEST_EXPECT_EXTENSION is set (ctest, the wheel test, the
GPU run: a build that has it must be tested with it).
"""
import os

import pytest

_outcomes = {"ran": 0, "skipped": 0}


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (and PyTorch); run by ctest as python_bindings_gpu")


def pytest_runtest_logreport(report):
    if report.skipped:
        _outcomes["skipped"] += 1
    elif report.when == "call" or report.failed:
        _outcomes["ran"] += 1


def pytest_sessionfinish(session, exitstatus):
    code = os.environ.get("KILN_PYTEST_ALL_SKIPPED_EXIT")
    if code and exitstatus == 0 and _outcomes["ran"] == 0 and _outcomes["skipped"] > 0:
        session.exitstatus = int(code)


@pytest.fixture(params=["extension", "ctypes"])
def launcher(request, monkeypatch):
    import kiln
    if request.param == "ctypes":
        monkeypatch.setenv("KILN_PYTHON_NO_EXTENSION", "1")
        return "ctypes"
    monkeypatch.delenv("KILN_PYTHON_NO_EXTENSION", raising=False)
    lib = kiln._lib.get()
    if lib.extension is None:
        if os.environ.get("KILN_TEST_EXPECT_EXTENSION"):
            pytest.fail(f"KILN_TEST_EXPECT_EXTENSION is set but kiln._fastlaunch is not loaded: {lib.extension_status}")
        pytest.skip(f"no kiln._fastlaunch: {lib.extension_status}")
    return "extension"
