#!/usr/bin/env bash
# TileLang through kiln in ONE device call, from the repository root, carrying TileLang's
# wheels (.whl, see README.md here) and a small kiln build (.gpu-mini: bin/kiln, lib/libkiln,
# keys/test.key and test.pub):
#   1. gpu_export_and_check.sh: export each kernel with TileLang's default Hopper lowering (and
#      the cp.async GEMM), TileLang's own launch checked against PyTorch, its timings;
#   2. kiln pack each exported package with the carried key;
#   3. check_default_on_gpu.py: each archive through kiln against TileLang's own launch on the
#      same inputs: bit-identical, kernel time within 2%.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
mini=$(pwd)/.gpu-mini
export OUT=${OUT:-/tmp/tilelang-out} TILELANG_EXPORT_DIR=/tmp/kiln-tilelang
status=0
bash examples/tilelang/gpu_export_and_check.sh || status=1
export PYTHONPATH=/tmp/site:$(pwd)/packager/python KILN_LIBRARY=$mini/lib/libkiln.so.0 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$mini/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
archives=() packages=()
for pkg in "$TILELANG_EXPORT_DIR"/tilelang-*/; do
  pkg=${pkg%/}
  [ -f "$pkg/kiln.toml" ] || continue
  archive=$TILELANG_EXPORT_DIR/$(basename "$pkg").kiln
  if "$mini/bin/kiln" pack "$pkg/kiln.toml" --key "$mini/keys/test.key" -o "$archive" 2>&1 | tee -a "$OUT/export.log"; then
    "$mini/bin/kiln" inspect "$archive" | sed -n '/kernels/,/members/p' | tee -a "$OUT/export.log"
    archives+=("$archive") packages+=("$pkg")
  else
    status=1
  fi
done
python3 examples/tilelang/check_default_on_gpu.py --packages "${packages[@]}" -- "${archives[@]}" "$mini/keys/test.pub" 2>&1 \
  | grep -v 'TileLang:tilelang.jit.kernel:INFO' | tee "$OUT/kiln-vs-tilelang.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
