#!/usr/bin/env bash
# The exporters (kiln.export) on the GPU in ONE device call, from the repository root, carrying .whl (TileLang's
# wheels: examples/tilelang/README.md) and .gpu-mini (bin/kiln, lib/libkiln.so.0 and libzstd,
# keys/test.key and test.pub, from ci/gpu-build.sh's build-gpu):
#   1. python -m kiln.export (the documented API and nothing else) exports, packs and signs seven
#      kernels on the GPU: Triton softmax, layernorm, the seed's GEMM and the TMA matmul; TileLang's
#      seed GEMM, its dynamic-M variant and FlashAttention; and the softmax for sm_80 alone;
#   2. kiln verify --run on each (the package's own test vectors, from its reference); the sm_80
#      archive must be refused here, and the CUDA driver is asked directly what it makes of its cubin;
#   3. ci/gpu_export_check.py: each archive through the Python bindings against the framework's own
#      launch on the same inputs (bit for bit), and the kiln.torch_op custom op natively and on the
#      reference route, eager and under torch.compile.
# Prints a table last; $OUT/gpu-export.txt holds the whole output.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD mini=$PWD/.gpu-mini work=/tmp/kiln-exports
OUT=${OUT:-/tmp/gpu-export-out}
mkdir -p "$work" "$OUT"
exec > >(tee -a "$OUT/gpu-export.txt") 2>&1  # (not a pipe: the table's rows live in this shell)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "installing the carried TileLang wheels failed"; exit 1; }
export PYTHONPATH=/tmp/site:$root/packager/python KILN_LIBRARY=$mini/lib/libkiln.so.0 KILN_CLI=$mini/bin/kiln
export LD_LIBRARY_PATH=$mini/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH
key=$mini/keys/test.key pub=$mini/keys/test.pub
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch, triton, tilelang; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "tilelang", tilelang.__version__)' 2>&1 | grep -v INFO
}

rows=() status=0 entries=()
# export NAME FRAMEWORK FILE:KERNEL [EXPORT OPTIONS...]: export, pack, verify --run; one table row.
export_one() {
  local name=$1 framework=$2 spec=$3 exported=FAIL verified=FAIL start=$SECONDS
  shift 3
  echo "== $name: python -m kiln.export $framework $spec $*"
  python3 -m kiln.export "$framework" "$spec" -o "$work/$name" --pack "$key" "$@" > "$work/$name.export" 2>&1 \
    && [ -f "$work/$name.kiln" ] && exported=ok
  grep -v ':INFO\]' "$work/$name.export"
  if [ "$exported" = ok ]; then
    "$mini/bin/kiln" verify "$work/$name.kiln" --trust "$pub" --run > "$work/$name.verify" 2>&1
    local rc=$?
    cat "$work/$name.verify"
    if [ "$name" = softmax-sm80 ]; then
      # no code for this GPU: must be refused, with the reason, never run
      grep -q ' not run$' "$work/$name.verify" && ! grep -q ' PASS$' "$work/$name.verify" && verified="refused (expected)"
    elif [ $rc -eq 0 ] && grep -q '^verified' "$work/$name.verify" && ! grep -qE ' (FAIL|not run)$' "$work/$name.verify"; then
      verified="PASS ($(grep -c ' PASS$' "$work/$name.verify") tests)"
    fi
  fi
  case "$verified" in PASS*|refused*) ;; *) status=1 ;; esac
  rows+=("$(printf '%-26s %-9s %-10s %-22s %4ds' "$name" "$framework" "$exported" "$verified" $((SECONDS - start)))")
  [ "$name" != softmax-sm80 ] && [ "$exported" = ok ] && entries+=("$framework:${spec%%:*}:${spec##*:}:$work/$name")
}
export_one softmax triton examples/triton/softmax.py:softmax_kernel --target sm_90a
export_one layernorm triton examples/triton/layernorm.py:layer_norm_fwd --target sm_90a
export_one matmul-relu-triton triton examples/triton/matmul_relu_triton.py:matmul_relu_kernel
export_one matmul-tma-triton triton examples/triton/matmul_tma_triton.py:matmul_tma_kernel
export_one matmul-relu-tilelang tilelang examples/tilelang/matmul_relu_tilelang.py:matmul_relu
export_one matmul-relu-dynamic-m tilelang examples/tilelang/matmul_relu_tilelang.py:matmul_relu_dynamic_m
export_one flash-attention tilelang examples/tilelang/flash_attention_tilelang.py:flashattn
export_one softmax-sm80 triton examples/triton/softmax.py:softmax_kernel --target sm_80
echo "== the CUDA driver on the sm_80 cubin, asked directly (cuModuleLoadData):"
python3 - "$work/softmax-sm80/softmax.sm_80.cubin" "$work/softmax/softmax.sm_90a.cubin" <<'PY'
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx, mod, name = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_char_p()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev); cu.cuCtxSetCurrent(ctx)
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    rc = cu.cuModuleLoadData(ctypes.byref(mod), data)
    cu.cuGetErrorName(rc, ctypes.byref(name))
    print(f"  {path.rsplit('/', 1)[1]}: cuModuleLoadData -> {rc} ({name.value.decode()})")
PY
echo "== kiln against the frameworks' own launches, and the torch op"
python3 ci/gpu_export_check.py "$pub" "$work" "${entries[@]}" > "$work/check.txt" 2>&1
[ $? = 0 ] || status=1
grep -v ':INFO\]' "$work/check.txt"
tar czf "$OUT/exports.tar.gz" -C "$work" --exclude='*.npy' --exclude='*.kiln' . 2>/dev/null
sleep 1  # let tee catch up before the table
{
  echo
  echo "GPU export summary ($(date -u '+%F %H:%M UTC'))"
  printf '%-26s %-9s %-10s %-22s %5s\n' package framework exported "verify --run" time
  printf '%s\n' "${rows[@]}"
  grep -E '^(PASS|FAIL)  ' "$work/check.txt" | sed 's/^/  /'
  [ $status -eq 0 ] && echo "verdict: PASS" || echo "verdict: FAIL"
}
exit $status
