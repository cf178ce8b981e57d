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
