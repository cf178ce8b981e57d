#!/usr/bin/env bash
# Builds kiln and runs the whole test suite in four stages, then prints one summary: each
# stage with its tests passed / failed / skipped and its time, and a verdict line. A stage whose
# tests fail does not stop the next ones (the summary shows everything that is wrong at once);
# a build that fails does. Run ci/install-deps.sh first (the README's second set-up command does
# both). 16m54s on 2 cores when last measured (2026-12-03, in a fresh Debian 12 chroot, its build
# on top of the demo's; from nothing the build takes 3m17s). Budget per stage, kept in README.md
# too: build 4 min (unity batches, CMakeLists.txt's KILN_UNITY_BUILD), tests 2 (the wheel test
# reuses this build's libkiln and kiln command), ASan+UBSan build 4 (clang, -O1), its tests 1.5
# (every test that hands kiln's C/C++ code bytes), fuzz 4.5 (clang build, then the five targets
# 60 s each, one per core), TSan build 4 (-O1, file by file), its tests 0.5: 20.5 minutes; CI
# (.ci/run, with ci/install-deps.sh) must stay under 30.
#   KILN_BUILD_DIR     build folder (default: build; the stages add -asan, -fuzz, -tsan)
#   KILN_FUZZ_SECONDS  libFuzzer time per target (default: 60)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)
results=$build-results
rm -rf "$results" && mkdir -p "$results"
summary=()
failed=0

# record NAME RC SECONDS COUNTS: one summary row; COUNTS is "passed failed skipped".
record() {
  local name=$1 rc=$2 seconds=$3 passed failed_n skipped verdict=ok
  read -r passed failed_n skipped <<< "$4"
  # A build stage has no counts ("-"); "?" means the stage's report was missing or unreadable.
  if [ "$rc" -ne 0 ] || { [ "$failed_n" != - ] && [ "$failed_n" != 0 ]; }; then verdict=FAILED failed=1; fi
  summary+=("$(printf '%-34s %7s %7s %8s %7s  %s' "$name" "$passed" "$failed_n" "$skipped" \
    "$((seconds / 60))m$(printf %02d $((seconds % 60)))s" "$verdict")")
}
# build_or_stop NAME COMMAND...: a build step; on failure the summary so far is printed and the
# script stops (nothing later can run without it).
build_or_stop() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  if ! "$@"; then
    record "$name" 1 $((SECONDS - start)) "- - -"
    print_summary
    exit 1
  fi
  record "$name" 0 $((SECONDS - start)) "- - -"
}
print_summary() {
  echo
  echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $jobs cores)"
  printf '%-34s %7s %7s %8s %7s  %s\n' stage passed failed skipped time result
  printf '%s\n' "${summary[@]}"
  if [ "$failed" -eq 0 ]; then
    echo "verdict: PASS (every stage passed; skipped tests need a GPU or a tool this machine lacks, and say which)"
  else
    echo "verdict: FAIL (see the stages marked FAILED above; their output is further up)"
  fi
}
# ctest_stage NAME BUILD [CTEST ARGS...]: runs ctest with a JUnit report and records its counts.
ctest_stage() {
  local name=$1 dir=$2 start=$SECONDS rc
  shift 2
  echo "== $name"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --output-junit "$PWD/$results/$name.xml" "$@"
  rc=$?
  record "$name" $rc $((SECONDS - start)) "$(python3 ci/count_tests.py "$results/$name.xml")"
}

configure() {  # configure BUILD_DIR [CMAKE ARGS...]
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${@:2}"
}
# The sanitizer builds (ASan+UBSan, TSan) compile at -O1, keeping RelWithDebInfo's -g and NDEBUG:
# the level the sanitizers' documentation recommends, with the same instrumentation as at -O2 (if
# anything, fewer checked accesses are optimised away), for about a third less compile time with
# gcc (measured on manifest.cpp and round_trip_test.cpp under ASan; a little less with clang). The
# plain build stays at -O2.
sanitizer_opt=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG")

# ---- 1. The plain build and the whole suite.
build_plain() { configure "$build" && cmake --build "$build" -j "$jobs"; }
build_or_stop "build" build_plain
ctest_stage "tests" "$build"

# ---- 2. The suite again under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build:
# every test that hands kiln's C/C++ code bytes runs instrumented (every reader of attacker bytes:
# archives, manifests, code objects, .npy, registry replies; the CLI, the runtime, the store). Left
# to the plain run above, by their ctest labels (tests/CMakeLists.txt says which and why):
# foreign-host, libkiln loaded into Python, Go and Rust, hosts that would need the ASan runtime
# preloaded before their own start-up; no-kiln-code, checks of files and text (the schema, the
# README, exported symbols, the ABI) that run no kiln code on any input.
# Built with clang 14 (as the fuzz targets are; the plain and TSan builds are gcc's): it compiles
# this code under ASan in well under half gcc's time, and its UBSan has -fsanitize=function, which
# gcc's lacks (it found libkiln calling a reference through a pointer of another function type).
# The ASan runtime is linked as a shared library (-shared-libasan), since libkiln links with
# -z defs and clang puts its static runtime in executables only.
clang_c=$(command -v clang-14 || command -v clang)
clang_cxx=$(command -v clang++-14 || command -v clang++)
asan="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
build_asan() {
  local link
  # A folder configured by another compiler (gcc, before this stage used clang) starts afresh.
  grep -qs "^CMAKE_CXX_COMPILER:[A-Z]*=$clang_cxx\$" "$build-asan/CMakeCache.txt" || rm -rf "$build-asan"
  link="$asan -shared-libasan -Wl,-rpath,$("$clang_cxx" -print-runtime-dir)"
  configure "$build-asan" -DKILN_BUILD_BENCH=OFF -DCMAKE_C_COMPILER="$clang_c" -DCMAKE_CXX_COMPILER="$clang_cxx" \
    "${sanitizer_opt[@]}" -DCMAKE_C_FLAGS="$asan" -DCMAKE_CXX_FLAGS="$asan" \
    -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" &&
    cmake --build "$build-asan" -j "$jobs"
}
build_or_stop "build (ASan+UBSan)" build_asan
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest_stage "tests (ASan+UBSan)" "$build-asan" -LE '^(foreign-host|no-kiln-code)$'

# ---- 3. Fuzz smoke: each libFuzzer target (archive, manifest, code objects, .npy, OCI manifest)
# from seeds made by the plain build, after replaying tests/fuzz/regressions; the targets run side
# by side, one per core, each for its full time. A target counts as passed when it ran its time
# without a crash.
start=$SECONDS
echo "== fuzz"
tests/fuzz/run.sh "$build" "${KILN_FUZZ_SECONDS:-60}"
rc=$?
ok=$(awk 'NR > 1 && $NF == "ok"' "$build-fuzz/summary.txt" 2>/dev/null | wc -l)
bad=$(awk 'NR > 1 && $NF != "ok"' "$build-fuzz/summary.txt" 2>/dev/null | wc -l)
[ "$rc" -eq 0 ] || [ "$bad" -gt 0 ] || bad=1
record "fuzz (libFuzzer, ${KILN_FUZZ_SECONDS:-60} s a target)" $rc $((SECONDS - start)) "$ok $bad 0"

# ---- 4. Concurrency under ThreadSanitizer: the runtime's API tests (threads launching one
# kernel at once; launches while a package swaps archives) in a separately instrumented build.
# This build compiles file by file (KILN_UNITY_BUILD=OFF; the others compile in unity batches):
# a source that builds only because a batch-mate included a header for it, or that relies on a
# name another file of its batch declared, fails here. It covers libkiln and the kiln command
# (2m16s in batches, 3m56s file by file, on 2 cores).
tsan="-fsanitize=thread"
build_tsan() {
  configure "$build-tsan" -DKILN_BUILD_BENCH=OFF -DKILN_UNITY_BUILD=OFF "${sanitizer_opt[@]}" -DCMAKE_C_FLAGS="$tsan" -DCMAKE_CXX_FLAGS="$tsan" \
    -DCMAKE_EXE_LINKER_FLAGS="$tsan" -DCMAKE_SHARED_LINKER_FLAGS="$tsan" &&
    cmake --build "$build-tsan" -j "$jobs" --target kiln_runtime_api_tests kiln
}
build_or_stop "build (TSan)" build_tsan
start=$SECONDS
echo "== tests (TSan)"
TSAN_OPTIONS="halt_on_error=1" KILN_BINARY="$build-tsan/bin/kiln" "$build-tsan/bin/kiln_runtime_api_tests" \
  --gtest_output="xml:$results/tsan.xml"
rc=$?
record "runtime API tests (TSan)" $rc $((SECONDS - start)) "$(python3 ci/count_tests.py "$results/tsan.xml")"

print_summary
exit $failed
