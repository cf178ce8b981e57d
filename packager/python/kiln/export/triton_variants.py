"""Which divisibility specialisations of a Triton kernel to compile ahead of time.

Triton's JIT specialises each call on every integer argument that is a multiple of 16
(`tt.divisibility`), so one kernel runs as several code objects, each chosen by the call's values.
kiln.export compiles the same specialisations before any call and stores them as variants of one
kernel (MANIFEST.md, variant entries); libkiln picks the most specialised one whose conditions
hold. Compiling every combination is 2^n compiles, most of them identical code, so:

  1. the build with every candidate parameter divisible is compared with the general build: if
     the code is the same, no parameter's divisibility matters and there are no variants;
  2. each parameter whose divisibility changes nothing once the others are divisible (the code
     is byte-identical without it) is left out;
  3. every combination of the rest is compiled (at most `max_variants` of them, the largest
     first; a parameter beyond what the cap allows is named in `dropped`), and a combination
     whose code equals that of a combination it contains is left out (the smaller one serves
     its calls with the same code).

Only the logic lives here; `compile_with(subset)` compiles (for every target) with exactly the
parameters of `subset` divisible and returns one build per target, each with `.compiled.asm`.
"""
import itertools


def _same_code(a, b):
    return all(x.compiled.asm["cubin"] == y.compiled.asm["cubin"] for x, y in zip(a, b))


class Plan:
    """`variants`: [(subset, builds)], the most specialised first; `relevant`: the parameters
    whose divisibility changes the code; `dropped`: relevant ones the cap left out."""

    def __init__(self, variants, relevant, dropped):
        self.variants, self.relevant, self.dropped = variants, relevant, dropped


def plan(general, dims, compile_with, max_variants):
    dims = list(dims)
    if not dims or max_variants <= 0:
        return Plan([], [], [])
    cache = {(): general}

    def build(subset):
        if subset not in cache:
            cache[subset] = compile_with(set(subset))
        return cache[subset]

    full = tuple(dims)
    if _same_code(build(full), general):
        return Plan([], [], [])
    relevant = [d for d in dims if not _same_code(build(tuple(x for x in dims if x != d)), build(full))]
    if not relevant:  # the code needs any one of several: each counts
        relevant = dims
    keep = len(relevant)
    while keep and 2**keep - 1 > max_variants:
        keep -= 1
    relevant, dropped = relevant[:keep], relevant[keep:]
    kept = [()]
    for size in range(1, len(relevant) + 1):
        for subset in itertools.combinations(relevant, size):
            code = build(subset)
            if not any(set(t) <= set(subset) and _same_code(code, build(t)) for t in kept):
                kept.append(subset)
    variants = [(s, build(s)) for s in sorted(kept[1:], key=len, reverse=True)]
    return Plan(variants, relevant, dropped)
