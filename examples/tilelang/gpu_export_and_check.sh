#!/usr/bin/env bash
# One device call, from the repository root, with TileLang's wheels carried in .whl
# (see README.md here: slim_wheels.py makes them small enough):
#
#   bash examples/tilelang/gpu_export_and_check.sh            # carry: [".whl"]
#
# 1. installs the carried wheels into /tmp/site (the device README's line);
# 2. exports, with TileLang's default lowering for the local GPU, the seed GEMM + ReLU (TMA,
#    warp-specialised), the FlashAttention forward, the cp.async GEMM and the dynamic-M GEMM,
#    each into a kiln package folder tilelang-<kernel>/ (kiln.toml + files), in parallel;
#    each export also runs TileLang's own launch once against PyTorch;
# 3. times TileLang's own launches (check_default_on_gpu.py --tilelang-only);
# 4. leaves in $OUT (a device call brings back at most 8 files):
#      tilelang-packages.tar.gz   the package folders, to pack and sign on the build machine
#      export.log                 what each export said
#      tilelang-timings.txt       TileLang's own kernel times
# Then, on the build machine: tar xzf tilelang-packages.tar.gz; kiln pack each
# tilelang-*/kiln.toml; and in a second call (wheels, kiln build and archives carried):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site KILN_LIBRARY=<build>/runtime/libkiln.so.0 \
#     && python3 examples/tilelang/check_default_on_gpu.py [--packages tilelang-*] ARCHIVES... PUBKEY
set -uo pipefail
OUT=${OUT:-/tmp/tilelang-out}
WORK=${TILELANG_EXPORT_DIR:-/tmp/kiln-tilelang}
KERNELS=${TILELANG_KERNELS:-gemm fa gemm-cp-async gemm-dynamic-m}
# A dry run without a GPU: TILELANG_EXPORT_ARGS="--target sm_90a" (exports only, no launches)
EXPORT_ARGS=${TILELANG_EXPORT_ARGS:-}
mkdir -p "$OUT" "$WORK"
here=$(cd "$(dirname "$0")" && pwd)

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { echo "installing the carried wheels failed"; exit 1; }
export PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  python3 -c 'import sys, torch, tilelang; print("python", sys.version.split()[0], "torch", torch.__version__, "tilelang", tilelang.__version__)'
} 2>&1 | tee "$OUT/export.log"

pids=()
for k in $KERNELS; do
  python3 "$here/export_tilelang.py" "$WORK/tilelang-$k" --kernel "$k" $EXPORT_ARGS >"$WORK/export-$k.log" 2>&1 &
  pids+=($!)
done
status=0
i=0
for k in $KERNELS; do
  wait "${pids[$i]}"; rc=$?
  i=$((i + 1))
  echo "===== export $k: exit $rc" | tee -a "$OUT/export.log"
  grep -v 'TileLang:tilelang.jit.kernel:INFO' "$WORK/export-$k.log" | tail -n 40 | tee -a "$OUT/export.log"
  [ "$rc" = 0 ] || status=1
done

check_list=$(for k in $KERNELS; do [ -f "$WORK/tilelang-$k/kiln.toml" ] && printf '%s,' "$k"; done)
if [ -n "$check_list" ] && [ -z "$EXPORT_ARGS" ]; then
  python3 "$here/check_default_on_gpu.py" --tilelang-only --kernels "${check_list%,}" 2>&1 \
    | grep -v 'TileLang:tilelang.jit.kernel:INFO' | tee "$OUT/tilelang-timings.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

folders=$(cd "$WORK" && ls -d tilelang-*/ 2>/dev/null | tr -d /)
[ -n "$folders" ] && tar -C "$WORK" -czf "$OUT/tilelang-packages.tar.gz" $folders
ls -la "$OUT"
exit $status
