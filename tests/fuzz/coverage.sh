#!/usr/bin/env bash
# Line and region coverage of kiln's parsers by the corpora a fuzz run left behind.
#   tests/fuzz/coverage.sh MAIN_BUILD_DIR
# Run after tests/fuzz/run.sh MAIN_BUILD_DIR SECONDS: its corpora stay in
# MAIN_BUILD_DIR-fuzz/work/<target>/corpus. This builds the targets once more with clang's
# source-based coverage (no sanitizers, so the counts are not disturbed), replays each corpus
# without mutating (-runs=0), and prints llvm-cov's report for the files each target exists for.
set -euo pipefail
cd "$(dirname "$0")/../.."
main_build=$(cd "${1:?usage: tests/fuzz/coverage.sh MAIN_BUILD_DIR}" && pwd)
work=$main_build-fuzz/work
cov_build=$main_build-fuzzcov
profdata=$(command -v llvm-profdata-14 || command -v llvm-profdata)
llvmcov=$(command -v llvm-cov-14 || command -v llvm-cov)

source tests/fuzz/build-targets.sh
build_fuzz_targets "$cov_build" "-fsanitize=fuzzer-no-link -fprofile-instr-generate -fcoverage-mapping" \
  "-fprofile-instr-generate" >/dev/null
targets=("${fuzz_targets[@]}")

sources() {  # the files each target is there to exercise
  case $1 in
    archive) echo runtime/core/archive_reader.cpp runtime/core/format.cpp runtime/core/kernel_table.cpp \
                  runtime/core/compress.cpp runtime/core/trust.cpp ;;
    manifest) echo runtime/core/manifest.cpp ;;
    code_object) echo runtime/core/code_object.cpp runtime/core/cuda_code_object.cpp \
                      runtime/core/amdgpu_code_object.cpp runtime/core/elf64.cpp ;;
    npy) echo runtime/core/npy.cpp ;;
    oci_manifest) echo runtime/store/oci_manifest.cpp runtime/core/json_reader.cpp ;;
  esac
}

for t in "${targets[@]}"; do
  corpus=$work/$t/corpus
  [ -d "$corpus" ] || { echo "coverage: no corpus for $t in $corpus (run tests/fuzz/run.sh first)"; exit 1; }
  raw=$cov_build/$t.profraw
  rm -f "$raw"
  LLVM_PROFILE_FILE=$raw KILN_FUZZ_TRUST="$main_build/tests/keys/test.pub" \
    "$cov_build/bin/kiln_fuzz_$t" -runs=0 "$corpus" > "$cov_build/$t.replay.log" 2>&1
  "$profdata" merge -sparse "$raw" -o "$cov_build/$t.profdata"
  echo "== $t: $(ls "$corpus" | wc -l) corpus inputs"
  # shellcheck disable=SC2046
  "$llvmcov" report "$cov_build/bin/kiln_fuzz_$t" -instr-profile="$cov_build/$t.profdata" $(sources "$t") |
    awk 'NR == 1 { print "file regions functions lines"; next } $1 !~ /^-+$/ { print $1, $4, $7, $10 }' | column -t
done
