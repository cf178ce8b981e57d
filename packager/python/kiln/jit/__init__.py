"""Capture and serve what an application's JIT compilers build (Triton, and the Triton kernels
PyTorch Inductor generates), so that an unchanged app boots from a signed kiln archive with no
compilation: `kiln.capture` records, `kiln.serve` serves. This package holds their shared parts:

    triton_keys   the components of Triton's cache key, and which one differs on a miss
    recorder      the cache manager and hooks that record a capture
    package       a capture folder into a kiln package folder (kiln.toml)
    served        a verified archive as Triton's cache: lookups, arch checks, misses, report
    hooks         installing either into Triton (and PyTorch) in this process
"""
