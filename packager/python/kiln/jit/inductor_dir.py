"""Keeping Inductor's cache folder where kiln put it, for a capture or a served boot.

Inductor reads and writes its caches in the folder cache_dir() names: torch.compile's graphs and
AOTAutograd entries (pickles), the kernel modules it imports, tuning results. cache_dir() reads
TORCHINDUCTOR_CACHE_DIR at every call, and apps set that variable in code to keep their caches
across runs. Capturing, a warm folder of the app's would answer Inductor from whatever lies there
(a stale or planted graph sealed into the archive, kernels never compiled and so never recorded);
serving, Inductor would load the app's folder unchecked instead of the archive's entries. So while
kiln captures or serves, cache_dir() names kiln's folder whatever the variable says.
"""
import os
import sys


_pinned = {}  # while kiln pins: "folder", "on_moved", "told"


def pin(folder, on_moved):
    """From now on cache_dir() is `folder` in this process; on_moved(asked) is called once, the
    first time the variable is found naming another folder. Nothing where torch has no Inductor."""
    try:
        from torch._inductor.runtime import cache_dir_utils
    except ImportError:
        return
    _pinned.update(folder=folder, on_moved=on_moved, told=False)
    original = cache_dir_utils.cache_dir
    if getattr(original, "_kiln", False):
        return  # already replaced (an earlier pin): the new folder holds from now on

    def cache_dir():
        folder = _pinned.get("folder")
        if folder is None:  # unpinned: Inductor's own answer
            return original()
        asked = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        if asked and os.path.abspath(asked) != folder and not _pinned["told"]:
            _pinned["told"] = True
            _pinned["on_moved"](asked)
        os.makedirs(folder, exist_ok=True)
        return folder
    cache_dir._kiln = True
    # Every module that imported the function by name (torch's own modules do), and the module
    # itself for those imported from now on.
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get("cache_dir") is original:
            module.cache_dir = cache_dir


def unpin():
    """cache_dir() answers as Inductor's own does again (TORCHINDUCTOR_CACHE_DIR, else its default)."""
    _pinned.clear()
