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

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build:
# every reader of attacker bytes (archives, manifests, code objects, .npy) runs instrumented.
# Two tests are left to the plain run above: they load libkiln into Python and link it from
# Rust, hosts that would need the ASan runtime preloaded before their own start-up.
asan="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$asan" -DCMAKE_CXX_FLAGS="$asan" -DCMAKE_EXE_LINKER_FLAGS="$asan" -DCMAKE_SHARED_LINKER_FLAGS="$asan"
cmake --build "$build-asan" -j "$jobs"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$build-asan" --output-on-failure -j "$jobs" -E '^(python_bindings|install_and_embed_from_c_and_rust)$'

# Fuzz smoke: each libFuzzer target (archive, manifest, code objects, .npy) for a minute from
# seeds made by the build above, after replaying tests/fuzz/regressions.
tests/fuzz/run.sh "$build" 60

# Concurrency under ThreadSanitizer: the runtime's API tests (threads launching one kernel at
# once; launches while a package swaps archives) in a separately instrumented build.
tsan="-fsanitize=thread"
cmake -S . -B "$build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$tsan" -DCMAKE_CXX_FLAGS="$tsan" -DCMAKE_EXE_LINKER_FLAGS="$tsan" -DCMAKE_SHARED_LINKER_FLAGS="$tsan"
cmake --build "$build-tsan" -j "$jobs" --target kiln_runtime_api_tests kiln
TSAN_OPTIONS="halt_on_error=1" KILN_BINARY="$build-tsan/bin/kiln" "$build-tsan/bin/kiln_runtime_api_tests"
