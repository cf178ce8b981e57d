"""Small file helpers shared by capture and serve: atomic writes (several processes of one app may
write one capture folder at once, as Triton's own cache does) and safe member names."""
import os
import re
import tempfile

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,200}$")


def safe_name(name, what):
    """A file name from a compiler's cache (Triton's own names: 'kernel.cubin', '__grp__kernel.json'),
    refused where it could leave its folder or is not a plain name."""
    if not _SAFE_NAME.match(name) or name in (".", ".."):
        raise ValueError(f"{what}: {name!r} is not a plain file name ([A-Za-z0-9_.+-], 1-200 characters)")
    return name


def write_atomic(path, data, mode=0o644):
    """Writes `data` (bytes or str) to `path` through a temporary file in the same folder and a
    rename, so a reader never sees a partial file; returns the path."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
