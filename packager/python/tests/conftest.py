"""pytest hooks for the bindings' tests.

Tests that need a CUDA GPU carry the `gpu` marker. ctest runs them apart from the others
(tests/CMakeLists.txt: python_bindings_gpu, `-m gpu`) with KILN_PYTEST_ALL_SKIPPED_EXIT set:
when every test it selected was skipped (no GPU, no PyTorch), the run exits with that code
instead of 0, and ctest's SKIP_RETURN_CODE lists it as skipped rather than passed.
"""
import os

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
