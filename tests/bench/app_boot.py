#!/usr/bin/env python3
"""Boot of an unchanged app, side by side on one GPU host (tests/gpu/app_boot/app.py: an HF Llama
under torch.compile plus two explicit Triton kernels, one autotuned, and a TileLang GEMM + ReLU):

  cold JIT   empty Triton, Inductor and TileLang caches: everything compiles (the first run, which
             fills the warm caches, and with --rounds > 1 one more in the first round)
  warm JIT   the three caches filled by an earlier run of the app: the compilers' own reuse
  kiln       fresh process, empty cache folders, PATH without any compiler: every lookup served by
             `python -m kiln.serve` from the archive `python -m kiln.capture` recorded
  with --precompile, the same warm and kiln boots with TORCH_CACHING_PRECOMPILE=1 (torch's own
  experimental Dynamo cache, captured and served like the rest) in capture, warm caches and boots

Each mode runs in fresh processes, interleaved, ROUNDS times; the table gives medians of time from
process start to the first output, the first compiled forward, the first explicit Triton calls,
the first TileLang call, compilations (Triton's listener, new TileLang cache entries, kiln's
report), programs started (a Python audit hook), and whether the outputs are bit-identical: a JIT
boot's to the first cold run's, a served boot's to those of the JIT run it captured (the app
autotunes at every JIT boot, so two JIT boots may pick different configs). The warm-cache app is also started once with the compiler-less PATH the served
app gets, to show whether it can boot there at all. The run fails (exit 1) where a served boot
compiled anything, had Inductor generate a captured graph again, started a program or computed
other bits than its captured run: the zero-JIT proof is checked, not only printed.

    app_boot.py --kiln KILN_COMMAND --work DIR [--rounds 3] [--precompile]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "..", "gpu", "app_boot", "app.py")
NO_COMPILER_PATH = "/nonexistent-kiln-bench"   # no cc, gcc, ld, ptxas, nvcc, file, ldconfig on it


def new_triton_entries(env, since):
    """Kernels Triton compiled into the run's cache folder (Inductor's compile workers included):
    complete entries (__grp__ files) written since `since`."""
    root = env.get("TRITON_CACHE_DIR")
    if not root or not os.path.isdir(root):
        return 0
    return sum(1 for d, _, files in os.walk(root) for f in files
               if f.startswith("__grp__") and os.path.getmtime(os.path.join(d, f)) >= since)


def new_tilelang_entries(env, since):
    """TileLang kernels compiled into the run's TileLang cache folder since `since`."""
    root = env.get("TILELANG_CACHE_DIR")
    if not root or not os.path.isdir(root):
        return 0
    return sum(1 for d, dirs, _ in os.walk(root) if os.path.basename(d) == "kernels"
               for k in dirs if os.path.getmtime(os.path.join(d, k)) >= since)


def run_app(mode, out, env, command_prefix=(), check=True):
    env = dict(env, KILN_APP_AUDIT="1", PYTHONUNBUFFERED="1")
    start = time.time()
    r = subprocess.run([*command_prefix, sys.executable, APP, "--out", out], capture_output=True, text=True, env=env,
                       timeout=900)
    wall = time.time() - start
    boot = None
    for line in r.stdout.splitlines():
        if line.startswith("BOOT "):
            boot = json.loads(line[5:])
    if (r.returncode != 0 or boot is None) and check:
        raise SystemExit(f"{mode}: the app failed (exit {r.returncode})\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}")
    if boot is not None:
        boot["compilations"] = max(boot.get("compilations_in_process", 0), new_triton_entries(env, start - 1))
        boot["tilelang_compilations"] = new_tilelang_entries(env, start - 1)
    return {"mode": mode, "exit": r.returncode, "wall_s": wall, "boot": boot, "stderr": r.stderr[-3000:]}


def same_outputs(a, b):
    """True when every output tensor is bit-identical; else a line saying which differ and by how much."""
    import torch
    x, y = torch.load(a), torch.load(b)
    if set(x) != set(y):
        return f"different outputs: {sorted(x)} vs {sorted(y)}"
    differ = [f"{k} (max abs diff {(x[k].double() - y[k].double()).abs().max().item():.3g})"
              for k in sorted(x) if not torch.equal(x[k], y[k])]
    return True if not differ else "differs: " + ", ".join(differ)


def compilations(run):
    """Triton and TileLang compilations of one boot: the app's own count or kiln's reports', the larger."""
    reports = run.get("reports", [])
    return (max(run["boot"]["compilations"], sum(rep["triton_compilations"] for rep in reports))
            + max(run["boot"]["tilelang_compilations"], sum(rep.get("tilelang_compilations", 0) for rep in reports)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precompile", action="store_true",
                        help="also warm and kiln boots with TORCH_CACHING_PRECOMPILE=1 (torch's Dynamo cache)")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the rounds: one warm JIT and one kiln boot with the first forward under "
                             "cProfile ($OUT/profile-warm.txt, $OUT/profile-kiln.txt)")
    args = parser.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    base = dict(os.environ)
    for v in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TILELANG_CACHE_DIR", "KILN_SERVE", "KILN_CAPTURE_DIR",
              "TORCH_CACHING_PRECOMPILE"):
        base.pop(v, None)

    def caches(name):
        d = os.path.join(work, name)
        shutil.rmtree(d, ignore_errors=True)
        return {"TRITON_CACHE_DIR": os.path.join(d, "triton"), "TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "inductor"),
                "TILELANG_CACHE_DIR": os.path.join(d, "tilelang")}

    # The reference outputs, and the warm caches: one cold run fills them.
    warm = caches("warm")
    reference = os.path.join(work, "jit.pt")
    first = run_app("cold JIT (fills the warm caches)", reference, dict(base, **warm))
    subprocess.run([args.kiln, "keygen", "--out", os.path.join(work, "release")], check=True, capture_output=True)

    def capture(tag, extra):
        """Captures the app (in fresh caches) and seals it: the archive's path."""
        cap = os.path.join(work, f"capture{tag}")
        r = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", cap, "--", sys.executable, APP, "--out",
                            os.path.join(work, f"capture{tag}.pt")], capture_output=True, text=True,
                           env=dict(base, **caches(f"capture-caches{tag}"), **extra))
        print(r.stdout[-3000:], r.stderr[-3000:])
        if r.returncode != 0:
            raise SystemExit(f"capture{tag} failed")
        archive = os.path.join(work, f"app{tag}.kiln")
        subprocess.run([args.kiln, "pack", os.path.join(cap, "kiln.toml"), "--key",
                        os.path.join(work, "release.key"), "-o", archive, "-q"], check=True)
        return archive

    archive = capture("", {})
    size = os.path.getsize(archive)

    def served(i, archive=archive, extra=None, mode="kiln", captured_run=os.path.join(work, "capture.pt")):
        report = os.path.join(work, f"report-{i}-{{pid}}.json")
        out = os.path.join(work, f"served-{i}.pt")
        env = dict(base, **caches(f"served-{i}"), **(extra or {}), PATH=NO_COMPILER_PATH)
        res = run_app(mode, out, env, command_prefix=(sys.executable, "-m", "kiln.serve", archive, "--trust",
                                                      os.path.join(work, "release.pub"), "--report", report, "--"))
        reports = [json.load(open(os.path.join(work, f))) for f in os.listdir(work)
                   if f.startswith(f"report-{i}-")]
        res["reports"] = reports
        res["identical"] = same_outputs(out, captured_run)
        return res

    if args.profile:
        out_dir = os.environ.get("OUT", work)
        warm_run = run_app("warm JIT", os.path.join(work, "warm-p.pt"),
                           dict(base, **warm, KILN_APP_PROFILE=os.path.join(out_dir, "profile-warm.txt")))
        base["KILN_APP_PROFILE"] = os.path.join(out_dir, "profile-kiln.txt")
        kiln_run = served("p")
        print("warm", warm_run["boot"], "\nkiln", kiln_run["boot"], kiln_run["identical"])
        return

    # One unmeasured warm boot first: on the H200 the first boot after the cold one was seen to
    # compile 5 kernels again (cause not established here), so the warm rows measure the steady
    # state, the baseline's best case.
    run_app("warm JIT (settles the caches)", os.path.join(work, "warm-settle.pt"), dict(base, **warm))
    results = {"cold JIT": [], "warm JIT": [], "kiln": []}
    precompile = {"TORCH_CACHING_PRECOMPILE": "1"}
    if args.precompile:
        results.update({"warm JIT+pc": [], "kiln+pc": []})
        warm_pc = caches("warm-pc")
        for settle in ("fills", "settles"):
            run_app(f"warm JIT+pc ({settle} the caches)", os.path.join(work, "warm-pc-settle.pt"),
                    dict(base, **warm_pc, **precompile))
        archive_pc = capture("-pc", precompile)
    first["identical"] = True  # the reference itself
    results["cold JIT"].append(first)
    for i in range(args.rounds):
        if i == 0 and args.rounds > 1:
            out = os.path.join(work, f"cold-{i}.pt")
            res = run_app("cold JIT", out, dict(base, **caches(f"cold-{i}")))
            res["identical"] = same_outputs(out, reference)
            results["cold JIT"].append(res)
        out = os.path.join(work, f"warm-{i}.pt")
        res = run_app("warm JIT", out, dict(base, **warm))
        res["identical"] = same_outputs(out, reference)
        results["warm JIT"].append(res)
        results["kiln"].append(served(i))
        if args.precompile:
            out = os.path.join(work, f"warm-pc-{i}.pt")
            res = run_app("warm JIT+pc", out, dict(base, **warm_pc, **precompile))
            res["identical"] = same_outputs(out, reference)
            results["warm JIT+pc"].append(res)
            results["kiln+pc"].append(served(f"pc{i}", archive_pc, precompile, "kiln+pc",
                                             os.path.join(work, "capture-pc.pt")))
    no_cc = run_app("warm JIT, no compiler on PATH", os.path.join(work, "warm-nocc.pt"),
                    dict(base, **warm, PATH=NO_COMPILER_PATH), check=False)

    with open(os.path.join(os.environ.get("OUT", work), "app-boot.json"), "w") as f:
        json.dump({"first": first, "results": results, "warm_no_compiler": no_cc, "archive_bytes": size}, f, indent=1)
    for res in results["kiln"]:
        for rep in res["reports"]:
            print("serve report:", json.dumps({k: rep[k] for k in ("served", "compiled", "refused", "lookup_seconds",
                                                                     "triton_compilations", "triton_cache_hits",
                                                                     "tilelang_compilations",
                                                                     "by_reason", "programs", "notes") if k in rep})[:3000])
    print()
    print(f"archive: {size / 1e6:.1f} MB; warm JIT with no compiler on PATH: "
          + ("booted" if no_cc["exit"] == 0 and no_cc["boot"] else f"did not boot (exit {no_cc['exit']}): "
             + no_cc["stderr"].strip().splitlines()[-1][:200] if no_cc["stderr"].strip() else f"exit {no_cc['exit']}"))
    for mode, rows in results.items():
        for r in rows:
            if r["identical"] is not True:
                print(f"{mode}: output {r['identical']}")
    print("identical: a JIT boot's outputs against the first cold run's; a served boot's against the JIT run it "
          "captured")
    print(f"{'mode':12} {'first output s':>15} {'forward s':>10} {'triton s':>9} {'tilelang s':>10} {'compiles':>9} "
          f"{'programs':>9} {'identical':>9} {'lookups s':>9}")
    kernels = lambda r: (r["boot"]["first_forward_s"] + r["boot"]["first_triton_calls_s"]  # noqa: E731
                         + r["boot"].get("first_tilelang_call_s", 0))
    for mode, rows in results.items():
        med = lambda key: statistics.median(r["boot"].get(key, 0) for r in rows)  # noqa: E731
        compiles = [compilations(r) for r in rows]
        programs = [len(r["boot"]["programs"]) for r in rows]
        print(f"{mode:12} {med('first_output_s'):15.3f} {med('first_forward_s'):10.3f} {med('first_triton_calls_s'):9.3f} "
              f"{med('first_tilelang_call_s'):10.3f} {max(compiles):9} {max(programs):9} "
              f"{str(all(r['identical'] is True for r in rows)):>9} "
              + (f"{statistics.median(sum(rep['lookup_seconds'] for rep in r['reports']) for r in rows):9.3f}"
                 if rows[0].get("reports") is not None else f"{'-':>9}"))
    for mode, rows in results.items():  # the last boot of each mode, by torch's own timers and counters
        boot = rows[-1]["boot"]
        phases = sorted(boot.get("torch_phases_s", {}).items(), key=lambda kv: -kv[1] if isinstance(kv[1], float) else 0)
        print(f"{mode}: Inductor {boot.get('inductor_counters', {})}; torch phases (s) "
              + ", ".join(f"{k} {v}" for k, v in phases[:8]))
    warm_med = statistics.median(kernels(r) for r in results["warm JIT"])
    for mode in [m for m in results if m.startswith("kiln")]:
        print(f"first compiled forward + first Triton and TileLang calls, {mode} / warm JIT: "
              f"{statistics.median(kernels(r) for r in results[mode]) / warm_med:.3f} (goal <= 0.5)")
    # The proof this benchmark exists for, checked rather than read off the table: a served boot
    # compiles nothing (Triton, TileLang, nor Inductor regenerating a captured graph), starts no
    # program and computes what the captured run did. A boot that does not fails the run.
    broken = []
    for mode in [m for m in results if m.startswith("kiln")]:
        for i, r in enumerate(results[mode]):
            boot = r["boot"]
            why = [f"{n} {what}" for n, what in (
                (compilations(r), "compilations"),
                (boot.get("inductor_counters", {}).get("fxgraph_cache_miss", 0), "torch.compile graph(s) generated again"),
                (len(boot["programs"]), "programs started")) if n]
            if r["identical"] is not True:
                why.append(f"outputs {r['identical']}")
            if why:
                broken.append(f"{mode} boot {i + 1}: " + ", ".join(why))
    if broken:
        print("zero JIT at boot: NOT met: " + "; ".join(broken))
        raise SystemExit(1)
    print("zero JIT at boot: met in every served boot (nothing compiled or generated again, no program, "
          "bit-identical outputs)")


if __name__ == "__main__":
    main()
