#!/usr/bin/env bash
# bf16 and fp8 end to end, in one call on the GPU machine: tests/gpu/dtypes/export_and_verify.py
# exports a bf16 RMSNorm and an fp8 (E4M3) GEMM with kiln.export (PyTorch references, sm_90a),
# packs each and runs `kiln verify --run` on it. Uses what ci/gpu-app-boot-stage.sh staged (libkiln
# and the kiln command). Prints a table last; the whole output goes to $OUT/gpu-dtypes.log.
#   ci/gpu-app-boot-stage.sh && <device run, carry .gpu-stage-app>: ci/gpu-dtypes.sh
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$(pwd)/.gpu-stage-app
out=${OUT:-/tmp}
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$(pwd)/packager/python" KILN_LIBRARY="$stage/lib/libkiln.so.0" PYTHONUNBUFFERED=1
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 tests/gpu/dtypes/export_and_verify.py --kiln "$stage/bin/kiln" --work /tmp/kiln-dtypes
} 2>&1 | tee "$out/gpu-dtypes.log"
exit "${PIPESTATUS[0]}"
