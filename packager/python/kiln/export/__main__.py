"""python -m kiln.export: the exporters from the command line.

    python -m kiln.export triton FILE.py:KERNEL -o OUT [--target sm_80 --target sm_90a] [--pack KEY]
    python -m kiln.export tilelang FILE.py:PROGRAM -o OUT [--target sm_90a] [--pack KEY]

FILE.py holds the kernel and, beside it, a dict named kiln_KERNEL with the keyword arguments of
kiln.export.triton / kiln.export.tilelang (params, grid, shapes, reference, tests, ...); the
options here override its targets and sequence. --pack seals OUT into OUT.kiln with the `kiln`
command (the one installed with this package, else the one on PATH).
"""
import argparse
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

from .errors import ExportError


def load(spec):
    """(module, kernel object, keyword arguments) for FILE.py:NAME."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ExportError(f"{spec!r}: give FILE.py:NAME (the file defining the kernel, and its name)")
    file = pathlib.Path(path)
    if not file.is_file():
        raise ExportError(f"{path}: no such file")
    sys.path.insert(0, str(file.resolve().parent))
    module_spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise ExportError(f"{path}: importing it failed: {type(e).__name__}: {e}") from e
    if not hasattr(module, name):
        raise ExportError(f"{path} defines no {name!r}")
    kwargs = getattr(module, f"kiln_{name}", None)
    if not isinstance(kwargs, dict):
        raise ExportError(f"{path} defines no dict kiln_{name} holding the export's keyword arguments, e.g.\n"
                          f"    kiln_{name} = dict(params=[...], grid=[...], shapes=[...], reference=..., tests=[...])")
    return module, getattr(module, name), dict(kwargs)


def kiln_command():
    here = pathlib.Path(sys.executable).parent / "kiln"
    return os.environ.get("KILN_CLI") or (str(here) if here.exists() else shutil.which("kiln"))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kiln.export", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("framework", choices=["triton", "tilelang"])
    ap.add_argument("kernel", metavar="FILE.py:NAME")
    ap.add_argument("-o", "--out", required=True, type=pathlib.Path, help="the package folder to write")
    ap.add_argument("--target", action="append", help="a target to compile for (repeatable): sm_80, sm_90a, ...; "
                                                      "default: the file's, else the GPU here")
    ap.add_argument("--sequence", type=int, help="the package's sequence number (rollback protection)")
    ap.add_argument("--no-tests", action="store_true", help="write no test vectors")
    ap.add_argument("--pack", metavar="KEY", help="then seal OUT into OUT.kiln, signed with this private key")
    a = ap.parse_args(argv)
    try:
        _, kernel, kwargs = load(a.kernel)
        if a.target:
            kwargs["targets"] = a.target
        if a.sequence is not None:
            kwargs["sequence"] = a.sequence
        if a.no_tests:
            kwargs["tests"] = ()
        from . import tilelang as export_tilelang, triton as export_triton
        done = (export_triton if a.framework == "triton" else export_tilelang)(kernel, a.out, **kwargs)
    except ExportError as e:
        print(f"kiln.export: {e}", file=sys.stderr)
        return 1
    print(f"kiln.export: wrote {done.path} ({', '.join(done.archs)})", flush=True)
    if a.pack:
        cli = kiln_command()
        if not cli:
            print("kiln.export: --pack needs the kiln command (install this package, or put kiln on PATH)", file=sys.stderr)
            return 1
        archive = pathlib.Path(str(a.out).rstrip("/") + ".kiln")  # OUT.kiln beside the folder
        return subprocess.call([cli, "pack", str(a.out / "kiln.toml"), "--key", a.pack, "-o", str(archive)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
