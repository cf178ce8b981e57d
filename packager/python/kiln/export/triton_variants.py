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

Tensors take part too: Triton compiles a tensor whose address is a multiple of 16 as aligned.
`plan_builds` makes the kernel's own code the build for any tensor (an offset view too) and every
specialised build, which assumes aligned tensors, a variant whose conditions say so; `tables`
writes the variants as the manifest lists them.

`plan` and `plan_ones` are the logic alone: `compile_with(subset)` compiles (for every target)
with exactly the expressions of `subset` divisible and returns one build per target, each with
`.compiled.asm`.
"""
import itertools
import re

from .declare import INTEGER_TYPES
from .errors import ExportError
from .expr import names_in, paren
from .triton_abi import TRITON_TO_KILN


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
    expressions whose constant-1 builds the cap left out; `aligned_build`: see plan_builds."""

    def __init__(self, variants, relevant, dropped):
        self.variants, self.relevant, self.dropped = variants, relevant, dropped
        self.dropped_ones = []
        self.aligned_build = None  # the builds for aligned tensors, where they are a variant (tried last)


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


def joined_within(conditions, room, what):
    """`conditions` as at most `room` entries of a variant's `when` (16 in all): one each when they
    fit, else joined with && into as few entries as the room needs, each within 256 characters."""
    if len(conditions) <= room:
        return list(conditions)
    per = -(-len(conditions) // max(room, 1))
    joined = [" && ".join(conditions[i:i + per]) for i in range(0, len(conditions), per)]
    if room < 1 or any(len(j) > 256 for j in joined):
        raise ExportError(f"variant {what}: its {len(conditions)} tensor alignment conditions do not fit a variant's 16 "
                          f"conditions of 256 characters: export with max_variants=0")
    return joined


def aligned_pointers(fn, build):
    """The pointer parameters (plain tensors, not descriptors) `build` compiled as 16-byte aligned:
    Triton's "D" on a pointer, which it gives a tensor whose address is a multiple of 16 unless
    the parameter is do_not_specialize_on_alignment."""
    return [kp.name for kp in fn.params
            if not kp.is_constexpr and str(build.signature.get(kp.name, "")).startswith("*")
            and any(a[0] == "tt.divisibility" for a in build.attrs.get(kp.name, []))]


def variant_name(one, exprs, taken):
    """"d16.k.n", "one.m.d16.n.k": what a variant assumes (an expression equal to 1, expressions
    divisible by 16; "a16" alone: only its tensors aligned), in kiln's name characters."""
    def word(e):
        return re.sub(r"[^A-Za-z0-9_]", "", e) or "x"
    parts = ([f"one.{word(one)}"] if one is not None else []) + (["d16." + ".".join(word(e) for e in exprs)] if exprs else [])
    name = ".".join(parts) or "a16"
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}.{n}", n + 1
    return unique


def can_be_one(expr, shapes):
    """True when `expr` is a call scalar some shape lets a call set to 1 (Triton then compiles it
    as a constant)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", expr):
        return False
    for s in shapes:
        if expr in s.values:
            if s.values[expr] == 1:
                return True
        elif expr in s.ranges:
            if s.ranges[expr][0] <= 1 <= s.ranges[expr][1]:
                return True
        else:
            return True
    return False


def divisibility_candidates(fn, args, general, specialize):
    """The integer kernel parameters Triton would specialise per call on `% 16` and the general
    build does not assume: computed from the call (not constants, which every call gives alike),
    not do_not_specialize. `specialize` (names) narrows them to the user's choice."""
    names = []
    for kp in fn.params:
        ty = general.signature.get(kp.name)
        if kp.is_constexpr or not isinstance(ty, str) or ty.startswith(("*", "tensordesc")) or ty not in TRITON_TO_KILN:
            continue
        if TRITON_TO_KILN[ty] not in INTEGER_TYPES or getattr(kp, "do_not_specialize", False):
            continue
        if any(a[0] == "tt.divisibility" for a in general.attrs.get(kp.name, [])):
            continue
        if not names_in(str(args[kp.name])):
            continue
        names.append(kp.name)
    if specialize is not None:
        unknown = set(specialize) - set(names)
        if unknown:
            raise ExportError(f"specialize names {sorted(unknown)}, which are not integer kernel parameters computed "
                              f"from the call (candidates: {', '.join(names) or 'none'})")
        names = [n for n in names if n in specialize]
    return names


def plan_builds(fn, args, shapes, builds, compile_all, *, max_variants, given_sample, specialize):
    """(the kernel's own builds, Plan, pointer_checks, assume_aligned) for the general `builds`.
    `compile_all(divisible, ones, unaligned)` compiles for every target. pointer_checks: the
    `addr(t) % 16 == 0` of each call tensor a build assumes aligned; assume_aligned: the kernel's
    own code assumes them, so they are conditions of its shapes (no variants: a given sample, only
    fixed shapes, or max_variants=0)."""
    # Triton compiles every tensor whose address is a multiple of 16 as aligned (its key's "D"),
    # and so does the general build: by call tensor, the kernel parameters it assumes aligned.
    aligned = {}
    for kp in aligned_pointers(fn, builds[0]):
        aligned.setdefault(str(args[kp]), []).append(kp)
    pointer_checks = [f"addr({t}) % 16 == 0" for t in aligned]
    if not max_variants or given_sample or all(s.fixed for s in shapes):
        # One code object, compiled for aligned tensors: a call with a misaligned one does not
        # belong to the kernel's range shapes (it goes to the reference, with the reason).
        return builds, Plan([], [], []), pointer_checks, bool(aligned)
    aligned_build, room = None, max_variants
    if aligned:
        # The kernel's own code must serve any call, an offset view too: it is compiled as
        # Triton compiles a call with misaligned tensors, and every specialised build, which
        # assumes aligned tensors, becomes a variant whose conditions say so.
        loose = compile_all(unaligned={kp for kps in aligned.values() for kp in kps})
        if not same_code(loose, builds):
            aligned_build = builds
            room -= 1  # the aligned build itself is a variant, tried last
        builds = loose
    # Kernel parameters computed from the same call expression (N and stride_bk both `n`)
    # are divisible together: the choice is over distinct expressions.
    groups = {}
    for d in divisibility_candidates(fn, args, builds[0], specialize):
        groups.setdefault(str(args[d]), []).append(d)
    # Divisibility is judged among builds that assume aligned tensors, as every variant does.
    baseline = aligned_build or builds
    result = plan(baseline, list(groups), lambda exprs: compile_all({d for e in exprs for d in groups[e]}), room)
    # A call passing 1 gets Triton's constant-1 build: for each expression a call can make 1,
    # with the others divisible (the common case: m = 1 on aligned n and k) and alone.
    ones = [e for e in groups if can_be_one(e, shapes)]
    result.variants = plan_ones(
        baseline, ones, result, lambda one, exprs: compile_all({d for e in exprs for d in groups[e]}, set(groups[one])),
        room)
    if aligned_build is not None:
        result.variants.append(Variant(None, (), aligned_build))
    result.aligned_build = aligned_build
    return builds, result, pointer_checks, False


def tables(variant_plan, variant_args, pointer_checks, stem, files):
    """The manifest's variant tables, in the order calls try them; each variant's cubins are added
    to `files`. variant_args: {id(variant): its own kernel_args} where they differ."""
    out = []
    for v in variant_plan.variants:
        vname = variant_name(v.one, v.divisible, [t["name"] for t in out])
        when = ([f"{paren(v.one)} == 1"] if v.one is not None else []) + [f"{paren(e)} % 16 == 0" for e in v.divisible]
        # Every variant was compiled for aligned tensors (Triton's key for the common call).
        when += joined_within(pointer_checks, 16 - len(when), vname)
        vcode = []
        for b in v.builds:
            files[f"{stem}.{b.arch}.{vname}.cubin"] = b.compiled.asm["cubin"]
            vcode.append({"arch": b.arch, "file": f"{stem}.{b.arch}.{vname}.cubin"})
        table = {"name": vname, "when": when, "code": vcode}
        if id(v) in variant_args:
            table["kernel_args"] = variant_args[id(v)]
        out.append(table)
    return out


def dropped_note(variant_plan, max_variants):
    """What the cap left out, for the toolchain record; None where nothing was."""
    dropped = []
    cap = f"max_variants={max_variants}" + (" (one of them the aligned-tensors build)" if variant_plan.aligned_build else "")
    if variant_plan.dropped:
        dropped.append(f"{', '.join(variant_plan.dropped)}: their divisibility changes the code too, but "
                       f"{cap} allows variants over {len(variant_plan.relevant)} expressions")
    if variant_plan.dropped_ones:
        dropped.append(f"{', '.join(e + ' == 1' for e in variant_plan.dropped_ones)}: no room left under {cap}")
    return "; ".join(dropped) or None
