#!/usr/bin/env bash
# Builds kiln and runs the whole test suite. Run ci/install-deps.sh first (the README's
# second set-up command does both).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

# Concurrency under ThreadSanitizer: the runtime's API tests (threads launching one kernel at
# once; launches while a package swaps archives) in a separately instrumented build.
tsan="-fsanitize=thread"
cmake -S . -B "$build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$tsan" -DCMAKE_CXX_FLAGS="$tsan" -DCMAKE_EXE_LINKER_FLAGS="$tsan" -DCMAKE_SHARED_LINKER_FLAGS="$tsan"
cmake --build "$build-tsan" -j "$jobs" --target kiln_runtime_api_tests kiln
TSAN_OPTIONS="halt_on_error=1" KILN_BINARY="$build-tsan/bin/kiln" "$build-tsan/bin/kiln_runtime_api_tests"
