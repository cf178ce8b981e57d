#!/usr/bin/env bash
# Variants on the GPU, in one call: tests/bench/variants_bench.py exports a split-K GEMM, an fp8
# GEMM and a bf16 RMSNorm with kiln.export's defaults (and with max_variants=0), packs them and
# times kiln's launch against Triton's own on aligned and unaligned calls, checking that the
# outputs are bit-identical. Uses what ci/gpu-app-boot-stage.sh staged (libkiln, the kiln command,
# kiln._fastlaunch; ci/gpu-build.sh's .gpu-stage holds them too: KILN_GPU_STAGE=.gpu-stage). Prints a
# table last; the whole output goes to $OUT/gpu-variants.log.
#   ci/gpu-app-boot-stage.sh && <device run, carry .gpu-stage-app>: ci/gpu-variants.sh
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$(pwd)/${KILN_GPU_STAGE:-.gpu-stage-app}
out=${OUT:-/tmp}
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$(pwd)/packager/python" KILN_LIBRARY="$stage/lib/libkiln.so.0" PYTHONUNBUFFERED=1
{
  echo "date: $(date -u +%FT%TZ)  tree: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  rm -rf /tmp/kiln-variants  # keygen refuses to overwrite a key: every run starts clean
  python3 tests/bench/variants_bench.py --kiln "$stage/bin/kiln" --work /tmp/kiln-variants
} 2>&1 | tee "$out/gpu-variants.log"
exit "${PIPESTATUS[0]}"
