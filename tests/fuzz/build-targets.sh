# Sourced by run.sh and coverage.sh: configures a clang build of kiln with the libFuzzer
# targets only, instrumented with COMPILE_FLAGS, and builds the four targets.
#   build_fuzz_targets BUILD_DIR COMPILE_FLAGS LINK_FLAGS
fuzz_targets=(archive manifest code_object npy oci_manifest)

build_fuzz_targets() {
  local dir=$1 flags=$2 link_flags=$3
  local clangxx clangc
  clangxx=$(command -v clang++-14 || command -v clang++)
  clangc=$(command -v clang-14 || command -v clang)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$clangxx" \
    -DCMAKE_C_COMPILER="$clangc" -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_FUZZ=ON \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$link_flags" >/dev/null
  cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target "${fuzz_targets[@]/#/kiln_fuzz_}"
}
