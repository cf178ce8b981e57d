"""How a served boot hands Inductor the kernels and tuning decisions of its captured cache entries.

Inductor's cache entries carry the kernels it can launch without Triton's launcher (statically
launched: cubins included, pickled with the autotuner of each), and torch.compile's artifacts carry
each kernel's tuning result (`<hash>.best_config`: the config autotuning, and with max-autotune
coordinate descent, chose). A served boot must use both as the capture left them: a kernel tuned
again picks by this boot's timings, so it may run another config than the captured run (other
bits) and ask for configs the capture never compiled (misses).
"""
import os


def admit_static_kernels(session, inductor_dir):
    """Each statically launched kernel goes through kiln first (the archive's entry, libkiln's
    verdict for the device, the archive's own cubin written where Inductor reads it:
    ServeSession.admit_static_kernel); one kiln does not admit is left for Inductor to load through
    Triton, where kiln answers or refuses it. An admitted kernel's tuning result is looked up in this
    process's Inductor cache folder `inductor_dir`, where the captured artifacts were loaded, rather
    than in the capture's (relocated). A torch without these bundles is left as is."""
    try:
        from torch._inductor.runtime.cache_dir_utils import triton_cache_dir
        from torch._inductor.runtime.runtime_utils import triton_hash_to_path_key
        from torch._inductor.triton_bundler import TritonBundler
        original = TritonBundler.__dict__["load_autotuners"].__func__
    except (ImportError, KeyError, AttributeError):
        return

    def admitted(autotuner):
        try:
            results = autotuner.kernel.compile_results
            checks = [(r.kernel.hash, r.kernel.name, int(r.compile_meta.get("device", 0))) for r in results]
        except (AttributeError, TypeError, ValueError):  # a shape this kiln does not know: through Triton
            return False
        ok = bool(checks) and all(session.admit_static_kernel(h, name, triton_cache_dir(device), triton_hash_to_path_key,
                                                              device)
                                  for h, name, device in checks)
        if ok:
            relocate(autotuner.kernel, inductor_dir)
        return ok

    def load_autotuners(cls, static_autotuners):
        return original(cls, [a for a in static_autotuners or [] if admitted(a)])
    TritonBundler.load_autotuners = classmethod(load_autotuners)


def relocate(kernel, inductor_cache_dir):
    """A pickled autotuner names the kernel module's path in the capture's Inductor cache folder
    (`<folder>/<2 chars>/<hash>.py`), and Inductor reads and writes the kernel's tuning result
    beside it. The same place under this process's folder is where its artifacts were loaded.
    The autotune cache made with the kernel (torch's AutotuneCache) holds the file it saves a
    tuning result to as `local_cache = (cache, path)`, worked out in the capture, beside the
    module: moved the same way, or a served boot that saves a result writes it into the capture's
    folder (a max-autotune app's did, on the H200)."""
    def moved(path):
        shard, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)
        return os.path.join(inductor_cache_dir, shard, name)

    filename = getattr(kernel, "filename", None)
    if isinstance(filename, str) and filename:
        kernel.filename = moved(filename)
    cache = getattr(kernel, "autotune_cache", None)
    local = getattr(cache, "local_cache", None)
    if isinstance(local, tuple) and len(local) == 2 and isinstance(local[1], str) and local[1]:
        cache.local_cache = (local[0], moved(local[1]))


def keep_tuning_decisions():
    """A statically launched kernel whose cached tuning result is one of its compiled configs gets
    that config, but without the mark that coordinate descent found it; so Inductor runs coordinate
    descent again at the kernel's first call, timing configs around it (torch 2.11,
    CachingAutotuner.recheck_autotune_cache). The mark is kept where the cached result has it."""
    try:
        from torch._inductor.runtime.triton_heuristics import (CachingAutotuner, check_autotune_cache,
                                                               triton_config_to_hashable)
        original = CachingAutotuner.recheck_autotune_cache
    except (ImportError, AttributeError):
        return
    if getattr(original, "_kiln", False):
        return

    def recheck_autotune_cache(self, *args, **kwargs):
        try:
            configs = [r.config for r in self.compile_results]
            cached = check_autotune_cache(configs, self.filename, self.inductor_meta)[0]
        except Exception:  # a shape this kiln does not know: Inductor's own behaviour
            cached = []
        original(self, *args, **kwargs)
        if len(cached) == 1 and getattr(cached[0], "found_by_coordesc", False) and len(self.compile_results) == 1:
            chosen = self.compile_results[0].config
            if triton_config_to_hashable(chosen) == triton_config_to_hashable(cached[0]):
                chosen.found_by_coordesc = True
    recheck_autotune_cache._kiln = True
    CachingAutotuner.recheck_autotune_cache = recheck_autotune_cache

