"""What both exporters end with: the check that each target compiled to its own code target, and
the Export they return."""
import pathlib

from .errors import ExportError


def require_distinct_archs(archs, targets):
    """Refuses targets that compile to the same code target (sm_90 twice, or sm_90 and 90): one
    package holds one code object per arch."""
    if len(set(archs)) != len(archs):
        raise ExportError(f"targets {targets} compile to the same code targets {archs}")


class Export:
    """What an export wrote: `path` (the package folder), `manifest` (kiln.toml's text), `archs`
    (the code objects' targets) and `compiled` (the framework's compiled kernel per arch)."""

    def __init__(self, path, text, compiled):
        self.path, self.manifest, self.compiled = pathlib.Path(path), text, compiled
        self.archs = list(compiled)

    def __repr__(self):
        return f"Export({str(self.path)!r}, archs={self.archs})"
