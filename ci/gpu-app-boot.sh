#!/usr/bin/env bash
# The capture/serve run, in one call on the GPU machine, over what ci/gpu-app-boot-stage.sh staged:
# the capture/serve tests on this host's Python, Triton and driver, then tests/bench/app_boot.py (an
# HF Llama under torch.compile plus explicit Triton kernels and a TileLang kernel: cold JIT, warm
# JIT and kiln-served boots side by side). KILN_APP_ROUNDS sets the rounds (default 2),
# KILN_APP_PRECOMPILE=1 adds warm and served boots with torch's experimental Dynamo precompile cache
# on, KILN_APP_TESTS=0 leaves the tests out, KILN_APP_TESTS_K=EXPR runs those pytest -k selects,
# KILN_APP_BENCH=0 leaves the benchmark out. Prints the benchmark's
# table last; the whole output goes to $OUT/gpu-app-boot.log and the raw figures to $OUT/app-boot.json.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$(pwd)/.gpu-stage-app
out=${OUT:-/tmp}
log=$out/gpu-app-boot.log
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# TileLang, carried as its unpacked wheels (ci/gpu-app-boot-stage.sh), after kiln on the path.
site=/tmp/kiln-tilelang-site
rm -rf "$site" && mkdir -p "$site" && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
  "$stage/tilelang-site.tar.xz" "$site"
export PYTHONPATH="$(pwd)/packager/python:$site" KILN_LIBRARY="$stage/lib/libkiln.so.0" KILN_CLI="$stage/bin/kiln"
export PYTHONUNBUFFERED=1 OUT="$out"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton, transformers, tilelang; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "transformers", transformers.__version__, "tilelang", tilelang.__version__)'
} 2>&1 | tee "$log"
status=0
if [ "${KILN_APP_TESTS:-1}" != 0 ]; then  # KILN_APP_TESTS=0: the benchmark alone (one call's 10 minutes)
  echo "===== capture/serve tests" | tee -a "$log"
  python3 -m pytest -q -rs -p no:cacheprovider ${KILN_APP_TESTS_K:+-k "$KILN_APP_TESTS_K"} \
    packager/python/tests/test_capture_serve.py \
    packager/python/tests/test_capture_serve_tilelang.py packager/python/tests/test_ldcache.py 2>&1 | tee -a "$log" || status=1
fi
[ "${KILN_APP_BENCH:-1}" = 0 ] && exit $status
echo "===== app boot benchmark" | tee -a "$log"
python3 tests/bench/app_boot.py --kiln "$stage/bin/kiln" --work /tmp/kiln-app-boot --rounds "${KILN_APP_ROUNDS:-2}" \
  ${KILN_APP_PRECOMPILE:+--precompile} 2>&1 \
  | tee -a "$log" || status=1
exit $status
