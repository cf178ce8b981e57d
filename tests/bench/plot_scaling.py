#!/usr/bin/env python3
"""Draws the scaling curves of a benchmark run (tests/bench/run.sh writes scaling.csv):
open + load one kernel against kernel count, the heap a fresh process adds by open + load one
against archive size (with the bound: what the reader holds, index head, decoded pages and the
members read), verify time against archive size, and verify against thread count beside openssl.
usage: plot_scaling.py SCALING_CSV OUT.png"""
import collections
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
series = collections.defaultdict(list)
for r in rows:
    series[(r["measure"], r["shape"])].append(r)

fig, axes = plt.subplots(1, 4, figsize=(20, 4.8))
ax = axes[0]
for shape in ("small", "big"):
    pts = sorted((int(r["kernels"]), float(r["value"])) for r in series[("open_load_one", shape)])
    if pts:
        ax.plot(*zip(*pts), marker="o", label=f"{shape} code objects")
ax.set(xscale="log", yscale="log", xlabel="kernels in the archive (4 targets each)",
       ylabel="open + authenticate + load one (us)", title="Open and load one kernel")
ax.legend()

ax = axes[1]
for shape in ("small", "big"):
    for measure, style, label in (("heap", "-o", "heap added, fresh process"), ("bound", "--", "what the reader holds")):
        pts = sorted((float(r["archive_mib"]), float(r["value"])) for r in series[(measure, shape)])
        if pts:
            ax.plot(*zip(*pts), style, label=f"{shape}: {label}")
ax.set(xscale="log", yscale="symlog", xlabel="archive size (MiB)", ylabel="KiB", title="Memory after open + load one")
ax.legend(fontsize=8)

ax = axes[2]
for shape in ("small", "big"):
    pts = sorted((float(r["archive_mib"]), float(r["value"])) for r in series[("verify", shape)])
    if pts:
        ax.plot(*zip(*pts), marker="o", label=f"{shape} code objects")
ax.set(xscale="log", yscale="log", xlabel="archive size (MiB)", ylabel="full verify, 1 thread (ms)",
       title="Verify time against size")
ax.legend()

ax = axes[3]
pts = sorted((int(r["kernels"]), float(r["value"])) for r in series[("verify_threads", "1GiB")])
if pts:
    ax.plot(*zip(*pts), marker="o", label="kiln verify -j T")
base = series[("verify_openssl", "1GiB")]
if base:
    ax.axhline(float(base[0]["value"]), color="gray", linestyle="--", label="openssl dgst -sha256")
ax.set(xscale="log", xlabel="threads", ylabel="ms", title="Verify a 1 GiB archive")
ax.legend()

fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print(f"wrote {sys.argv[2]}")
