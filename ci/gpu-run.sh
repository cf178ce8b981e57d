#!/usr/bin/env bash
# The whole GPU run, in one call on the GPU machine, over what ci/gpu-build.sh staged:
# the GPU test suite through libkiln on the real driver, the C API test, the runtime API
# tests, and the runtime benchmark against the raw driver. Prints a short table last.
# Full output goes to $OUT/gpu-run.log when $OUT is set (the device tool's output folder), and the
# benchmark's raw files there too (kiln_bench.json, *.rows.json, report.json, scaling.csv, and
# report.md: the run's summary table for tests/bench/RESULTS.md); none is written into the tree.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$(pwd)/.gpu-stage
log=${OUT:-/tmp}/gpu-run.log
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KILN_TEST_ARCHIVES="$stage/archives" KILN_TEST_KEYS="$stage/keys" KILN_BINARY="$stage/bin/kiln" KILN_CLI="$stage/bin/kiln"

declare -A result
run() {  # run NAME COMMAND...: records pass/fail, keeps the output in the log
  local name=$1; shift
  echo "===== $name: $*" | tee -a "$log"
  if "$@" 2>&1 | tee -a "$log"; then result[$name]=pass; else result[$name]=FAIL; fi
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  uname -r
} 2>&1 | tee "$log"

run gpu_tests "$stage/bin/kiln_gpu_tests" --gtest_color=no
run backend_conformance env KILN_CODE_OBJECTS="$stage/codeobjects" "$stage/bin/kiln_backend_tests" --gtest_color=no
run runtime_api_tests "$stage/bin/kiln_runtime_api_tests" --gtest_color=no
run c_api_test "$stage/bin/kiln_c_api_test" "$stage/archives/scale.kiln" "$stage/keys/test.pub"
run demo_c "$stage/bin/matmul_demo_c" "$stage/archives/matmul-relu.kiln" "$stage/keys/test.pub"
run demo_cpp "$stage/bin/matmul_demo_cpp" "$stage/archives/matmul-relu.kiln" "$stage/keys/test.pub"
run verify_on_gpu_host "$stage/bin/kiln" verify "$stage/archives/matmul-relu.kiln" --trust "$stage/keys/test.pub"
# Release checks on the target GPU: every test vector of the nvcc archive must pass, and the
# deliberately wrong kernel must fail with its error figures.
run verify_run_nvcc "$stage/bin/kiln" verify "$stage/archives/matmul-relu.kiln" --trust "$stage/keys/test.pub" --run
# The same vectors through one range shape (m = 1..8192, the test gives m = 256): the launch is
# computed from the call.
run verify_run_m_range "$stage/bin/kiln" verify "$stage/archives/matmul-relu-m-range.kiln" --trust "$stage/keys/test.pub" --run
# A tensor map passed by value, 2x1x1 clusters and 68 KiB of shared memory, from its test vector.
run verify_run_tma "$stage/bin/kiln" verify "$stage/archives/tma-pair-sum.kiln" --trust "$stage/keys/test.pub" --run
# A sparse archive pulled here for sm_90 with its test vectors (ci/gpu-sparse-stage.sh): the same
# digest as the whole one, the other targets' code absent, every test vector passing on the code it holds.
verify_run_sparse() {
  local a="$stage/archives/matmul-relu-sm_90-sparse.kiln" whole="$stage/archives/matmul-relu.kiln"
  "$stage/bin/kiln" inspect "$a" | grep -E "sparse|absent" || { echo "not a sparse archive"; return 1; }
  [ "$("$stage/bin/kiln" digest "$a")" = "$("$stage/bin/kiln" digest "$whole")" ] || { echo "another digest"; return 1; }
  "$stage/bin/kiln" verify "$a" --trust "$stage/keys/test.pub" --run
}
run verify_run_sparse verify_run_sparse
# Passes only for the failure it is about: exit 1 (refused) because the kernel ran and its
# results were outside tolerance, not because there was no GPU, no archive or a crash.
expect_out_of_tolerance() {
  local out rc
  out=$("$@" 2>&1); rc=$?
  printf '%s\n' "$out"
  [ "$rc" -eq 1 ] && grep -Eq "[1-9][0-9]* of [0-9]+ elements outside rtol" <<<"$out" && ! grep -q "not run" <<<"$out"
}
run verify_run_wrong_fails expect_out_of_tolerance "$stage/bin/kiln" verify "$stage/archives/matmul-relu-off-by-one.kiln" \
  --trust "$stage/keys/test.pub" --run
# An attestation of a passing run, checked by kiln (subject = the archive) and by the independent
# DSSE verifier where Python's cryptography is installed; a failing run writes none.
attest_run() {
  local a="$stage/archives/matmul-relu.kiln" out=/tmp/kiln-attest/matmul-relu.attestation.json
  rm -rf /tmp/kiln-attest && mkdir -p /tmp/kiln-attest || return 1
  "$stage/bin/kiln" verify "$a" --trust "$stage/keys/test.pub" --run --attest "$stage/keys/test.key" -o "$out" || return 1
  "$stage/bin/kiln" attest verify "$out" --trust "$stage/keys/test.pub" --archive "$a" || return 1
  if python3 -c "import cryptography" 2>/dev/null; then python3 tests/unit/dsse_verify.py "$out" "$stage/keys/test.pub" || return 1; fi
  "$stage/bin/kiln" verify "$stage/archives/matmul-relu-off-by-one.kiln" --trust "$stage/keys/test.pub" --run \
    --attest "$stage/keys/test.key" -o /tmp/kiln-attest/wrong.json >/dev/null 2>&1
  [ ! -e /tmp/kiln-attest/wrong.json ] || { echo "a failing run was attested"; return 1; }
  [ -n "${OUT:-}" ] && cp "$out" "$OUT/" || true
}
run attest_run attest_run
# What the attestation of this H200's run buys: a store that requires one activates the archive for
# an sm_90 fleet and refuses an sm_80 one; preflight says which targets are attested; and trust
# files: a version revoking the signing key, and an expired one, are refused with the reason.
attest_policy() {
  local w=/tmp/kiln-attest a="$stage/archives/matmul-relu.kiln" k="$stage/bin/kiln" pub="$stage/keys/test.pub"
  local att=$w/matmul-relu.attestation.json d
  d=$("$k" digest "$a") || return 1
  rm -rf "$w/store" && "$k" store init --store "$w/store" --trust "$pub" >/dev/null || return 1
  "$k" store add "$a" --store "$w/store" --attestation "$att" || return 1
  if "$k" store activate "$d" --store "$w/store" --require-attestation "$pub" --target sm_80; then
    echo "an archive attested on this H200 was activated for sm_80"; return 1
  fi
  "$k" store activate "$d" --store "$w/store" --require-attestation "$pub" --target sm_90 || return 1
  "$k" preflight "$a" --trust "$pub" --require-attestation "$pub" --attestation "$att" --target sm_80,sm_90 || return 1
  cp "$pub" "$w/release.pub" && rm -f "$w"/root.* "$w"/spare.* || return 1
  "$k" keygen --out "$w/root" >/dev/null && "$k" keygen --out "$w/spare" >/dev/null || return 1
  local id
  id=$("$k" verify "$a" --trust "$pub" | sed -n 's/.*key \([0-9a-f]\{32\}\).*/\1/p' | head -1)
  local head='[root]\nthreshold = 1\nkeys = ["root.pub"]\n[[key]]\npublic_key = "release.pub"\nroles = ["release", "attestation"]\n[[key]]\npublic_key = "spare.pub"\nroles = ["release"]\n'
  printf "version = 1\nexpires = 2099-01-01T00:00:00Z\n$head" > "$w/v1.toml"
  printf "version = 2\nexpires = 2099-01-01T00:00:00Z\n$head[[revoked]]\nkey_id = \"$id\"\nreason = \"gpu-run drill\"\n" > "$w/v2.toml"
  printf "version = 3\nexpires = 2001-01-01T00:00:00Z\n$head" > "$w/v3.toml"
  for v in 1 2 3; do "$k" trust sign "$w/v$v.toml" --key "$w/root.key" -o "$w/v$v.json" --force >/dev/null || return 1; done
  "$k" verify "$a" --trust "$w/v1.json" >/dev/null || return 1
  "$k" verify "$a" --trust "$w/v2.json" > "$w/v2.out" 2>&1 && { echo "a revoked key was accepted"; return 1; }
  grep -q "was revoked in trust version 2" "$w/v2.out" || { cat "$w/v2.out"; return 1; }
  "$k" verify "$a" --trust "$w/v3.json" > "$w/v3.out" 2>&1 && { echo "an expired trust file was accepted"; return 1; }
  grep -q "expired at 2001-01-01" "$w/v3.out" || { cat "$w/v3.out"; return 1; }
  cat "$w/v2.out" "$w/v3.out"
}
run attest_policy attest_policy
run preflight "$stage/bin/kiln" preflight "$stage/archives/matmul-relu-foreign.kiln" --trust "$stage/keys/test.pub"
run preflight_mixed "$stage/bin/kiln" preflight "$stage/archives/matmul-relu-mixed.kiln" --trust "$stage/keys/test.pub"
# `--target sm_90 --driver 13.0` (no GPU consulted) must agree with this H200's own preflight.
run preflight_target_agrees python3 ci/gpu_preflight_agree.py "$stage/bin/kiln" "$stage/keys/test.pub" sm_90 13.0 "$stage"/archives/*.kiln
run diag_show sh -c "bundle=\$(ls -d /tmp/kiln-diag-gpu-*/kiln-diag-* | head -1) && \"$stage/bin/kiln\" diag show \"\$bundle\""
# KILN_GPU_QUICK=1 stops here: the driver-level suite and release checks above, without the
# Python tests, the compilers' exports and the benchmark harness (a run in about a minute, for a
# change that touches only libkiln or the kiln command when the session's device time is short).
steps_triton=""
if [ -z "${KILN_GPU_QUICK:-}" ]; then
# The Python bindings on the real driver (their native-route test runs only here), on both call
# paths: kiln._fastlaunch, which ci/gpu-build.sh staged beside libkiln (required here), and ctypes.
# The capture/serve tests are ci/gpu-app-boot.sh's (they need its stage, and their whole apps under
# torch.compile take minutes of this call's ten).
export PYTHONPATH="$(pwd)/packager/python" KILN_LIBRARY="$stage/lib/libkiln.so.0" PYTHONUNBUFFERED=1
run python_tests env KILN_TEST_EXPECT_EXTENSION=1 python3 -m pytest -q -p no:cacheprovider packager/python/tests \
  --ignore=packager/python/tests/test_capture_serve.py --ignore=packager/python/tests/test_capture_serve_tilelang.py \
  --ignore=packager/python/tests/test_ldcache.py
# The Triton GEMM archive: the one ci/gpu-build.sh staged (KILN_TRITON_ARCHIVE), else exported
# here by this machine's Triton and packed with the staged kiln and test key (kiln.export --pack).
triton_archive="$stage/archives/matmul-relu-triton.kiln"
if [ ! -f "$triton_archive" ] && python3 -c "import triton, torch" 2>/dev/null; then
  rm -rf /tmp/kiln-triton && mkdir -p /tmp/kiln-triton
  run triton_export python3 -m kiln.export triton examples/triton/matmul_relu_triton.py:matmul_relu_kernel \
    -o /tmp/kiln-triton/matmul-relu-triton --pack "$stage/keys/test.key"
  steps_triton="triton_export"
  triton_archive=/tmp/kiln-triton/matmul-relu-triton.kiln
fi
if [ -f "$triton_archive" ]; then
  run triton_python python3 examples/triton/check_on_gpu.py "$triton_archive" "$stage/keys/test.pub"
  run triton_c "$stage/bin/matmul_demo_c" "$triton_archive" "$stage/keys/test.pub"
  run verify_run_triton "$stage/bin/kiln" verify "$triton_archive" --trust "$stage/keys/test.pub" --run
  mkdir -p /tmp/kiln-bench
  run python_launch_bench python3 tests/bench/python_launch_bench.py "$triton_archive" "$stage/keys/test.pub" \
    /tmp/kiln-bench/python_launch.rows.json
  steps_triton="$steps_triton triton_python triton_c verify_run_triton python_launch_bench"
fi
if [ -f "$stage/archives/matmul-relu-tilelang.kiln" ]; then
  run tilelang_python python3 examples/tilelang/check_on_gpu.py "$stage/archives/matmul-relu-tilelang.kiln" "$stage/keys/test.pub"
  steps_triton="$steps_triton tilelang_python"
fi
# Triton's TMA matmul (host TensorDescriptors) exported by the GPU's own Triton, packed, verified
# and checked against Triton's launch: bit-identical, speed at 8192^3, the m sweep, launch overhead.
if python3 -c "import triton" 2>/dev/null; then
  run triton_tma examples/triton/tma_gpu_run.sh
  steps_triton="$steps_triton triton_tma"
fi
# The benchmark harness last (it packs gigabytes first): host side and GPU side, one table.
run bench tests/bench/run.sh --bin "$stage/bin" --keys "$stage/keys" --code "$stage/bench" --work /tmp/kiln-bench --gpu
if [ -n "${OUT:-}" ]; then
  cp /tmp/kiln-bench/*.json /tmp/kiln-bench/report.md /tmp/kiln-bench/scaling.csv "$OUT/" 2>/dev/null || true
  python3 tests/bench/plot_scaling.py /tmp/kiln-bench/scaling.csv "$OUT/scaling.png" >> "$log" 2>&1 || true
fi
steps_triton="bench python_tests $steps_triton"
fi

steps="gpu_tests runtime_api_tests c_api_test demo_c demo_cpp verify_on_gpu_host verify_run_nvcc verify_run_m_range verify_run_tma verify_run_sparse verify_run_wrong_fails attest_run attest_policy preflight preflight_mixed preflight_target_agrees diag_show $steps_triton"
echo
echo "GPU run summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
printf '%-20s %s\n' "step" "result"
for step in $steps; do printf '%-20s %s\n' "$step" "${result[$step]:-not run}"; done
[ -n "${KILN_GPU_QUICK:-}" ] && echo "KILN_GPU_QUICK: python_tests, the compilers' exports and the benchmark harness not run"
grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?[.,]' "$log" | sed 's/^/  /'
sed -n '/^kiln against its baselines/,$p' "$log" | grep -v '^=====' | sed '/^$/q'
sed -n '/^Python launch overhead per call/,/^kiln (ctypes) \/ Triton/p' "$log"
sed -n '/^Triton TMA matmul through kiln/,/^$/p' "$log"
for step in $steps; do [ "${result[$step]:-}" = pass ] || exit 1; done
