#!/usr/bin/env bash
# The Triton TMA matmul through kiln, in one call on the GPU machine, over what
# ci/gpu-build.sh staged in .gpu-stage/ (carry it): export with the GPU's Triton, pack and sign
# with the staged kiln and test key, inspect, verify --run (the test vectors), then
# check_tma_on_gpu.py (bit-identity and speed at 8192^3, the m sweep, launch overhead).
#   examples/triton/tma_gpu_run.sh [PKG_DIR]
# PKG_DIR: a package folder exported beforehand (python -m kiln.export triton
# examples/triton/matmul_tma_triton.py:matmul_tma_kernel -o DIR, which needs no GPU) instead of
# exporting here. Logs go to $OUT/tma-run.log when $OUT is set.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
stage=$(pwd)/.gpu-stage
work=/tmp/kiln-tma
log=${OUT:-/tmp}/tma-run.log
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PYTHONPATH="$(pwd)/packager/python"
export PYTHONPATH KILN_LIBRARY="$stage/lib/libkiln.so.0" PYTHONUNBUFFERED=1
rm -rf "$work" && mkdir -p "$work"
: > "$log"
declare -A result
steps=""
run() {  # run NAME COMMAND...: records pass/fail, keeps the output in the log
  local name=$1; shift
  steps="$steps $name"
  echo "===== $name: $*" | tee -a "$log"
  if "$@" 2>&1 | tee -a "$log"; then result[$name]=pass; else result[$name]=FAIL; fi
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import triton, torch; print("triton", triton.__version__, "torch", torch.__version__)'; } 2>&1 | tee -a "$log"
pkg=${1:-$work/pkg}
if [ -z "${1:-}" ]; then
  run export python3 -m kiln.export triton examples/triton/matmul_tma_triton.py:matmul_tma_kernel -o "$pkg"
fi
archive=$work/matmul-tma-triton.kiln
run pack "$stage/bin/kiln" pack "$pkg/kiln.toml" --key "$stage/keys/test.key" -o "$archive"
run inspect "$stage/bin/kiln" inspect "$archive" --trust "$stage/keys/test.pub"
run verify_run "$stage/bin/kiln" verify "$archive" --trust "$stage/keys/test.pub" --run
run check python3 examples/triton/check_tma_on_gpu.py "$archive" "$stage/keys/test.pub" "$pkg"
if [ -n "${OUT:-}" ]; then cp "$pkg/kiln.toml" "$OUT/tma-kiln.toml" 2>/dev/null || true; fi
echo
printf '%-12s %s\n' step result
for s in $steps; do printf '%-12s %s\n' "$s" "${result[$s]}"; done
sed -n '/^Triton TMA matmul through kiln/,$p' "$log"
for s in $steps; do [ "${result[$s]}" = pass ] || exit 1; done
