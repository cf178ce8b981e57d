"""Which divisibility specialisations of a Triton kernel to compile ahead of time.

Triton's JIT specialises each call on every integer argument that is a multiple of 16
(`tt.divisibility`), so one kernel runs as several code objects, each chosen by the call's values.
kiln.export compiles the same specialisations before any call and stores them as variants of one
kernel (MANIFEST.md, variant entries); libkiln picks the most specialised one whose conditions
hold. The candidates are call expressions (kernel parameters the call computes alike, such as N
and stride_bk both `n`, are divisible together). Compiling every combination is 2^n compiles,
most of them identical code, so:

  1. the build with every candidate expression divisible is compared with the general build: if
     the code is the same, no expression's divisibility matters and there are no variants;
  2. each expression whose divisibility changes nothing once the others are divisible (the code
     is byte-identical without it) is left out;
  3. every combination of the rest is compiled (at most `max_variants` of them, the largest
     first; an expression beyond what the cap allows is named in `dropped`), and a combination
     whose code equals that of a combination it contains is left out (the smaller one serves
     its calls with the same code).

Triton also compiles a call passing 1 for an integer argument with that argument as the
constant 1 (it leaves the kernel's parameter list). For each expression some shape lets a call
set to 1, `plan_ones` adds that build with the other relevant expressions divisible (m = 1 on an
aligned n and k: a decode step) and alone, before the divisible ones (a call with m = 1 may hold
a divisible variant's conditions too, d16.n.k here, and must take the constant-1 build first),
within the same cap.

Only the logic lives here; `compile_with(subset)` compiles (for every target) with exactly the
expressions of `subset` divisible and returns one build per target, each with `.compiled.asm`.
"""
import itertools


def same_code(a, b):
    """True when two builds (one per target each) are byte for byte the same code."""
    return all(x.compiled.asm["cubin"] == y.compiled.asm["cubin"] for x, y in zip(a, b))


class Variant:
    """One build: `one` (an expression compiled as the constant 1, or None), `divisible` (the
    expressions compiled as multiples of 16) and `builds` (one per target)."""

    def __init__(self, one, divisible, builds):
        self.one, self.divisible, self.builds = one, tuple(divisible), builds

    def describe(self):
        return " and ".join(([f"{self.one} == 1"] if self.one is not None else []) +
                            [f"{e} % 16 == 0" for e in self.divisible]) or "aligned tensors alone"


class Plan:
    """`variants`: [Variant], in the order calls try them; `relevant`: the expressions whose
    divisibility changes the code; `dropped`: relevant ones the cap left out; `dropped_ones`:
    expressions whose constant-1 builds the cap left out."""

    def __init__(self, variants, relevant, dropped):
        self.variants, self.relevant, self.dropped = variants, relevant, dropped
        self.dropped_ones = []


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
    if same_code(build(full), general):
        return Plan([], [], [])
    relevant = [d for d in dims if not same_code(build(tuple(x for x in dims if x != d)), build(full))]
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
            if not any(set(t) <= set(subset) and same_code(code, build(t)) for t in kept):
                kept.append(subset)
    variants = [Variant(None, s, build(s)) for s in sorted(kept[1:], key=len, reverse=True)]
    return Plan(variants, relevant, dropped)


def plan_ones(general, ones, divisible_plan, compile_with, max_variants):
    """The constant-1 variants, then `divisible_plan`'s; `compile_with(one, exprs)` compiles with
    `one` as 1 and `exprs` divisible. A constant-1 build equal to its neighbour with fewer
    divisible expressions is left out (that one serves its calls with the same code)."""
    room = max_variants - len(divisible_plan.variants)
    out = []
    for e in ones:
        others = tuple(d for d in divisible_plan.relevant if d != e)
        alone = compile_with(e, ())
        candidates = []
        if others:
            full = compile_with(e, others)
            if not same_code(full, alone):
                candidates.append(Variant(e, others, full))
        candidates.append(Variant(e, (), alone))
        if len(candidates) > room:
            divisible_plan.dropped_ones.append(e)
            continue
        out += candidates
        room -= len(candidates)
    return out + divisible_plan.variants
