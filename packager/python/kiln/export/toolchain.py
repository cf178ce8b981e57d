"""The toolchain pin every export records in kiln.toml's [toolchain]: the compiler framework and
its commit where it exposes one, Python, PyTorch, the CUDA compiler actually used, and the driver
and GPU of the machine that compiled, or that there was none (a cross-compile)."""
import ctypes
import platform
import subprocess


def python_stack():
    pin = {"python": platform.python_version()}
    try:
        import torch
        pin["pytorch"] = torch.__version__
        if getattr(torch.version, "git_version", None):
            pin["pytorch_commit"] = torch.version.git_version
        if torch.version.cuda:
            pin["pytorch_cuda"] = torch.version.cuda
    except ImportError:
        pin["pytorch"] = "not installed"
    return pin


def tool_release(path):
    """'12.9' from `PATH --version` (ptxas, nvcc), or None."""
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in text.replace(",", " ").split():
        if word.startswith("V") and word[1:2].isdigit():
            return ".".join(word[1:].split(".")[:2])
    return None


def local_gpu():
    """{"driver": "13.0", "gpu": "NVIDIA H200", "gpu_cc": "9.0"} of device 0 through the CUDA driver,
    or {"gpu": "none"} where there is no driver or device (which is what a cross-compile records)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {"gpu": "none (no CUDA driver on the compiling machine)"}
    version, device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    if cuda.cuInit(0) != 0 or cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return {"gpu": "none (the CUDA driver did not initialise)"}
    pin = {"driver": f"{version.value // 1000}.{version.value % 1000 // 10}"}
    if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return dict(pin, gpu="none")
    cuda.cuDeviceGetName(name, len(name), device)
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)  # ..._MINOR
    return dict(pin, gpu=name.value.decode(errors="replace"), gpu_cc=f"{major.value}.{minor.value}")


def distribution_digest(name):
    """sha256 of an installed distribution's RECORD (the list of its files with their hashes):
    identifies the exact build installed, where the package exposes no commit. None if absent."""
    import hashlib
    import importlib.metadata
    try:
        record = importlib.metadata.distribution(name).read_text("RECORD")
    except importlib.metadata.PackageNotFoundError:
        return None
    return hashlib.sha256(record.encode()).hexdigest() if record else None
