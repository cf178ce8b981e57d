#!/usr/bin/env python3
"""Exports tests/gpu/dtypes/kernels.py's bf16 RMSNorm and fp8 GEMM with kiln.export (sm_90a),
packs each and, where a GPU is present, runs `kiln verify --run` on it; prints one line per kernel
and a table last. `--no-run` stops after the pack (what a machine without a GPU can check).

    export_and_verify.py --kiln KILN --work DIR [--no-run] [--reference-kind auto|numpy]
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402

import kiln.export as kx  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--no-run", action="store_true")
    parser.add_argument("--reference-kind", default="auto")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    key = os.path.join(args.work, "release")
    subprocess.run([args.kiln, "keygen", "--out", key], check=True, capture_output=True)
    rows, failed = [], False
    for fn, spec in ((kernels.rmsnorm_bf16, kernels.RMSNORM), (kernels.gemm_fp8, kernels.GEMM)):
        out = os.path.join(args.work, spec["name"])
        kx.triton(fn, out, targets=["sm_90a"], reference_kind=args.reference_kind, **spec)
        archive = out + ".kiln"
        packed = subprocess.run([args.kiln, "pack", os.path.join(out, "kiln.toml"), "--key", key + ".key", "-o",
                                 archive, "-q"], capture_output=True, text=True)
        if packed.returncode != 0:
            print(f"{spec['name']}: kiln pack failed: {packed.stderr.strip()}")
            rows.append((spec["name"], "pack failed", ""))
            failed = True
            continue
        if args.no_run:
            rows.append((spec["name"], "packed", ""))
            continue
        verified = subprocess.run([args.kiln, "verify", archive, "--trust", key + ".pub", "--run"], capture_output=True,
                                  text=True)
        print(f"== {spec['name']}: kiln verify --run (exit {verified.returncode})\n{verified.stdout}{verified.stderr}")
        rows.append((spec["name"], "passed" if verified.returncode == 0 else f"exit {verified.returncode}",
                     verified.stdout.strip().splitlines()[-1] if verified.stdout.strip() else ""))
        failed |= verified.returncode != 0
    print(f"{'kernel':14} {'result':12} last line")
    for name, result, last in rows:
        print(f"{name:14} {result:12} {last[:120]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
