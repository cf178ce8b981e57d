#!/usr/bin/env python3
"""Prints the comparison table of a benchmark run (every kiln figure against its baseline from
the same run), with the machine and the date (UTC) at its top, and writes the same rows as JSON,
as a Markdown table (the run's summary for tests/bench/RESULTS.md) and the scaling data for
plot_scaling.py as CSV.
usage: report.py KILN_BENCH_JSON [RUNTIME_BENCH_JSON ...] [--csv SCALING_CSV] [--json REPORT_JSON]
                 [--markdown REPORT_MD]
KILN_BENCH_JSON is kiln_bench's --benchmark_out; the others are what kiln_runtime_bench and
python_launch_bench.py write (each {"rows": [{name, kiln, baseline, unit, goal, goal_ratio}],
and optionally device, driver, cpu_model, date_utc}).
kiln_bench runs each timed benchmark repeatedly; its figure here is the `median` aggregate of the
repetitions. A benchmark run once (the memory rows) has no aggregate: its one run is used. A
repetition that failed makes the whole benchmark NOT RUN, and the run fails."""
import argparse
import csv
import json
import re
import sys

# What Google Benchmark appends to a registered name (the per-benchmark settings).
SETTING = re.compile(r"/(min_time|min_warmup_time|iterations|repeats|real_time|manual_time|process_time)(:[^/]*)?$")


def base_name(name):
    while m := SETTING.search(name):
        name = name[:m.start()]
    return name


def load_host(path):
    """Returns (context, benchmarks by name: the median aggregate where there are repetitions,
    else the one run; errors by name)."""
    data = json.load(open(path))
    medians, runs, errors = {}, {}, {}
    for b in data["benchmarks"]:
        name = base_name(b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
        elif b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
        else:
            runs.setdefault(name, []).append(b)
    out = dict(medians)
    for name, rs in runs.items():
        if name not in out:
            if len(rs) != 1:
                errors[name] = f"{len(rs)} repetitions and no median aggregate"
            else:
                out[name] = rs[0]
    for name in errors:
        out.pop(name, None)
    return data.get("context", {}), out, errors


def to_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    return b["real_time"] * scale


def by_count(bench, prefix):
    return {int(m.group(1)): b for name, b in bench.items() if (m := re.fullmatch(re.escape(prefix) + r"(\d+)", name))}


def host_rows(bench):
    rows = []
    for shape in ("small", "big"):
        opens = by_count(bench, f"open+load-one/{shape}/kernels:")
        pairs = by_count(bench, f"open+load-one-pair/{shape}/kernels:")
        if pairs:
            n = max(pairs)
            p = pairs[n]
            rows.append((f"open+load one, host: {shape}-{n} vs {shape}-1 ({p['archive_mib']:.1f} MiB), interleaved",
                         p["many_us"], p["one_us"], "us", "<= 1.10", 1.10))
            if "many_kept_us" in p:
                # The same loads with the signature memo kept: each archive's own cost, without the
                # variable time its signature takes to verify (a fixed offset of about 1 us each).
                rows.append((f"  the same, signature memo kept: {shape}-{n} vs {shape}-1", p["many_kept_us"],
                             p["one_kept_us"], "us", "report", 0))
        memory = by_count(bench, f"memory/{shape}/kernels:")
        if memory:
            n = max(memory)
            m = memory[n]
            # The performance goal: what an open + load adds to the heap within 1.5x of what the
            # reader must hold (the index head and pages it decoded, the members it read).
            # The heap is malloc's memory (the [heap] mapping and unnamed anonymous ones); all
            # anonymous memory (with the stack and the libraries' written data) is shown beside it.
            # Measured over 16 heap phases where the run has them (kiln_bench's memory row): the
            # mean is the goal's figure, the extremes a "report" row.
            phases = " (mean of 16 heap phases)" if "heap_kib_min" in m else ""
            rows.append((f"memory, fresh process: heap added{phases}, {shape}-{n} vs what the reader holds",
                         m.get("heap_kib", m["anon_kib"]), m["bound_kib"], "KiB", "<= 1.50", 1.50))
            if "heap_kib_min" in m:
                rows.append((f"  most / fewest heap added over the phases, {shape}-{n}",
                             m["heap_kib_max"], m["heap_kib_min"], "KiB", "report", 0))
            if "heap_kib" in m:
                rows.append((f"  anonymous added (the heap, the stack, libraries' data), {shape}-{n} vs the same",
                             m["anon_kib"], m["bound_kib"], "KiB", "report", 0))
            if "again_live_kib" in m:
                # Live heap (malloc's count, not pages): the first open + load of the process, and a
                # second one beside it, which meets OpenSSL's signature code and the arena set up.
                rows.append((f"  live heap, first open+load, {shape}-{n} vs the same", m["live_kib"], m["bound_kib"],
                             "KiB", "report", 0))
                rows.append((f"  live heap, a second open+load in the process, {shape}-{n} vs the same",
                             m["again_live_kib"], m["bound_kib"], "KiB", "report", 0))
            rows.append((f"  file-backed added, {shape}-{n} (all mappings) vs the same", m["file_kib"], m["bound_kib"],
                         "KiB", "report", 0))
            rows.append((f"  of which the archive's own pages, {shape}-{n}", m["archive_kib"], m["bound_kib"], "KiB",
                         "report", 0))
        plain = bench.get(f"read-plain-cubin/{shape}")
        if plain and 1 in opens:
            rows.append((f"open+load one, host: {shape}-1 vs reading the cubin", to_us(opens[1]), to_us(plain), "us",
                         "report", 0))
    pair = bench.get("verify-pair/threads:1")
    if pair:
        # openssl and kiln -j 1 in turn within each repetition (command_pair): medians of each;
        # openssl's is the baseline of the rows with more threads too.
        openssl_ms = pair["baseline_ms"]
        rows.append(("verify 1 GiB: kiln -j 1 vs openssl dgst, in turn", pair["kiln_ms"], openssl_ms, "ms", "<= 1.00", 1.0))
        for t, b in sorted(by_count(bench, "verify/kiln/threads:").items()):
            rows.append((f"verify 1 GiB: kiln -j {t} vs openssl dgst", to_us(b) / 1e3, openssl_ms, "ms", "< 1.00", 0.999))
    for t, p in sorted(by_count(bench, "pack-pair/threads:").items()):
        # zstd and kiln in turn within each repetition (kiln_bench's command_pair): medians of each.
        rows.append((f"pack: kiln -j {t} vs zstd -T{t}, in turn", p["kiln_ms"], p["baseline_ms"], "ms", "<= 1.20", 1.20))
    return rows


def write_csv(bench, path, machine, date):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["measure", "shape", "kernels", "archive_mib", "value", "unit", "machine", "date_utc"])

        def row(*values):
            w.writerow(list(values) + [machine, date])

        for name, b in bench.items():
            if m := re.fullmatch(r"open\+load-one/(\w+)/kernels:(\d+)", name):
                row("open_load_one", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{to_us(b):.2f}", "us")
            elif m := re.fullmatch(r"memory/(\w+)/kernels:(\d+)", name):
                for measure, key in (("resident", "rss_kib"), ("heap", "heap_kib"), ("anonymous", "anon_kib"),
                                     ("file", "file_kib"), ("archive_pages", "archive_kib"), ("bound", "bound_kib")):
                    row(measure, m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{b[key]:.0f}", "KiB")
            elif m := re.fullmatch(r"verify-in-process/(\w+)/kernels:(\d+)", name):
                row("verify", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{to_us(b) / 1e3:.3f}", "ms")
            elif m := re.fullmatch(r"verify/kiln/threads:(\d+)", name):
                row("verify_threads", "1GiB", m.group(1), "", f"{to_us(b) / 1e3:.3f}", "ms")
            elif name == "verify-pair/threads:1":
                row("verify_threads", "1GiB", "1", "", f"{b['kiln_ms']:.3f}", "ms")
                row("verify_openssl", "1GiB", "1", "", f"{b['baseline_ms']:.3f}", "ms")


def write_markdown(path, machine, date, table, errors):
    """The run's summary table as RESULTS.md keeps it: machine and date, then every row with kiln's
    figure and its baseline's side by side."""
    with open(path, "w") as f:
        f.write(f"Machine: {machine}; date {date} (UTC).\n\n")
        f.write("| benchmark | kiln | baseline | ratio | goal | |\n|---|---|---|---|---|---|\n")
        for r in table:
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}"
            verdict = "" if r["verdict"] == "report" else r["verdict"]
            f.write(f"| {r['name'].strip()} | {r['kiln']:.2f} {r['unit']} | {r['baseline']:.2f} {r['unit']} | {ratio} | "
                    f"{r['goal'].replace('<=', '≤')} | {verdict} |\n")
        for name, message in sorted(errors.items()):
            f.write(f"| {name} | not run: {message} | | | | |\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("others", nargs="*")
    ap.add_argument("--csv")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    context, bench, errors = load_host(args.host)
    rows = host_rows(bench)
    gpus = []
    for path in args.others:
        data = json.load(open(path))
        if data.get("device"):
            gpu = data["device"] + (f" (driver {data['driver']})" if data.get("driver") else "")
            if gpu not in gpus:
                gpus.append(gpu)
        rows += [(r["name"], r["kiln"], r["baseline"], r["unit"], r["goal"], r["goal_ratio"]) for r in data["rows"]]
    cpu = context.get("cpu_model") or "unknown CPU"
    machine = f"{cpu}, {context.get('num_cpus', '?')} cores" + (f"; GPU {', '.join(gpus)}" if gpus else "; no GPU run")
    date = context.get("date_utc") or context.get("date", "")
    if args.csv:
        write_csv(bench, args.csv, machine, date)
    print()
    print(f"kiln against its baselines, same run\nmachine: {machine}\ndate: {date} (UTC)")
    print(f"{'benchmark':82} {'kiln':>12} {'baseline':>12} {'ratio':>7} {'goal':>8}")
    table = []
    for name, value, base, unit, goal, goal_ratio in rows:
        ratio = value / base if base else float("inf")
        verdict = "" if not goal_ratio else ("met" if ratio <= goal_ratio else "MISSED")
        print(f"{name:82} {value:9.2f} {unit:3}{base:9.2f} {unit:3}{ratio:7.3f} {goal:>8} {verdict}")
        table.append({"name": name, "kiln": value, "baseline": base, "unit": unit, "ratio": ratio if base else None, "goal": goal,
                      "goal_ratio": goal_ratio, "verdict": verdict or "report"})
    # A baseline that did not run leaves its comparison out; say so, and fail the run.
    for name, message in sorted(errors.items()):
        print(f"{name:82} NOT RUN: {message}")
    if args.markdown:
        write_markdown(args.markdown, machine, date, table, errors)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "cpu_model": cpu, "cores": context.get("num_cpus"), "gpu": gpus,
                       "date_utc": date, "rows": table, "not_run": errors}, f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
