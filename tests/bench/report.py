#!/usr/bin/env python3
"""Prints the comparison table of a benchmark run (every kiln figure against its baseline from
the same run) and writes the scaling data for plot_scaling.py.
usage: report.py KILN_BENCH_JSON [RUNTIME_BENCH_JSON ...] [--csv SCALING_CSV]
KILN_BENCH_JSON is kiln_bench's --benchmark_out; the others are what kiln_runtime_bench and
python_launch_bench.py write (each {"rows": [{name, kiln, baseline, unit, goal, goal_ratio}]})."""
import argparse
import csv
import json
import re
import sys


def load_host(path):
    """Returns (context, benchmarks by name, errors by name)."""
    data = json.load(open(path))
    out, errors = {}, {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = b["name"].split("/min_time")[0].split("/iterations")[0].split("/real_time")[0]
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
        else:
            out[name] = b
    return data.get("context", {}), out, errors


def to_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    return b["real_time"] * scale


def host_rows(bench):
    rows = []
    for shape in ("small", "big"):
        opens = {int(m.group(1)): b for name, b in bench.items()
                 if (m := re.fullmatch(rf"open\+load-one/{shape}/kernels:(\d+)", name))}
        if 1 in opens and len(opens) > 1:
            n = max(opens)
            rows.append((f"open+load one, host: {shape}-{n} vs {shape}-1 ({opens[n]['archive_mib']:.0f} MiB)",
                         to_us(opens[n]), to_us(opens[1]), "us", "<= 1.20", 1.20))
            rows.append((f"resident memory: {shape}-{n} vs index+table+member", opens[n]["rss_kib"],
                         opens[n]["bound_kib"], "KiB", "<= 1.00", 1.00))
            if "anon_kib" in opens[n]:
                rows.append((f"  of which heap (anonymous): {shape}-{n}", max(opens[n]["anon_kib"], 0.0),
                             opens[n]["bound_kib"], "KiB", "<= 1.00", 1.00))
        plain = bench.get(f"read-plain-cubin/{shape}")
        if plain and 1 in opens:
            rows.append((f"open+load one, host: {shape}-1 vs reading the cubin", to_us(opens[1]), to_us(plain), "us",
                         "report", 0))
    openssl = bench.get("verify/openssl-dgst-sha256")
    if openssl:
        for name, b in sorted(bench.items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]) if kv[0].startswith("verify/kiln/") else 0):
            if m := re.fullmatch(r"verify/kiln/threads:(\d+)", name):
                t = int(m.group(1))
                rows.append((f"verify 1 GiB: kiln -j {t} vs openssl dgst", to_us(b) / 1e3, to_us(openssl) / 1e3, "ms",
                             "<= 1.00" if t == 1 else "< 1.00", 1.0 if t == 1 else 0.999))
    for name, b in sorted(bench.items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]) if kv[0].startswith("pack/kiln/") else 0):
        if m := re.fullmatch(r"pack/kiln/threads:(\d+)", name):
            z = bench.get(f"pack/zstd/threads:{m.group(1)}")
            if z:
                rows.append((f"pack: kiln -j {m.group(1)} vs zstd -T{m.group(1)}", to_us(b) / 1e3, to_us(z) / 1e3, "ms",
                             "<= 1.20", 1.20))
    return rows


def write_csv(bench, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["measure", "shape", "kernels", "archive_mib", "value", "unit"])
        for name, b in bench.items():
            if m := re.fullmatch(r"open\+load-one/(\w+)/kernels:(\d+)", name):
                w.writerow(["open_load_one", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{to_us(b):.2f}", "us"])
                w.writerow(["resident", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{b['rss_kib']:.0f}", "KiB"])
                w.writerow(["bound", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{b['bound_kib']:.0f}", "KiB"])
                if "anon_kib" in b:
                    w.writerow(["heap", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{max(b['anon_kib'], 0):.0f}", "KiB"])
            elif m := re.fullmatch(r"verify-in-process/(\w+)/kernels:(\d+)", name):
                w.writerow(["verify", m.group(1), m.group(2), f"{b['archive_mib']:.3f}", f"{to_us(b) / 1e3:.3f}", "ms"])
            elif m := re.fullmatch(r"verify/kiln/threads:(\d+)", name):
                w.writerow(["verify_threads", "1GiB", m.group(1), "", f"{to_us(b) / 1e3:.3f}", "ms"])
            elif name == "verify/openssl-dgst-sha256":
                w.writerow(["verify_openssl", "1GiB", "1", "", f"{to_us(b) / 1e3:.3f}", "ms"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("others", nargs="*")
    ap.add_argument("--csv")
    args = ap.parse_args()
    context, bench, errors = load_host(args.host)
    rows = host_rows(bench)
    headers = [f"host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, {context.get('date', '')}"]
    for path in args.others:
        data = json.load(open(path))
        headers.append(f"{path.rsplit('/', 1)[-1]}: {data.get('device', '')} {data.get('driver', '')}".strip())
        rows += [(r["name"], r["kiln"], r["baseline"], r["unit"], r["goal"], r["goal_ratio"]) for r in data["rows"]]
    if args.csv:
        write_csv(bench, args.csv)
    print()
    print("kiln against its baselines, same run (" + "; ".join(headers) + ")")
    print(f"{'benchmark':58} {'kiln':>12} {'baseline':>12} {'ratio':>7} {'goal':>8}")
    for name, value, base, unit, goal, goal_ratio in rows:
        ratio = value / base if base else float("inf")
        verdict = "" if not goal_ratio else ("met" if ratio <= goal_ratio else "MISSED")
        print(f"{name:58} {value:9.2f} {unit:3}{base:9.2f} {unit:3}{ratio:7.3f} {goal:>8} {verdict}")
    # A baseline that did not run leaves its comparison out; say so, and fail the run.
    for name, message in sorted(errors.items()):
        print(f"{name:58} NOT RUN: {message}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
