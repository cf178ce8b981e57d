#!/usr/bin/env bash
# Builds everything the GPU run needs, here (the GPU machine has no network and none of
# Debian's -dev packages), with OpenSSL, zstd and libstdc++ linked statically, and stages
# the binaries, libkiln and the signed test archives into .gpu-stage/ for the device call:
#   ci/gpu-build.sh && <device run, carry .gpu-stage.tar.xz>: tar -xJf .gpu-stage.tar.xz && ci/gpu-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
stage=.gpu-stage
# KILN_REGISTRY=OFF: push and pull need libcurl, which the GPU runner is not known to have and a
# statically linked kiln cannot bring; the GPU run never talks to a registry.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_STATIC_DEPS=ON -DKILN_REGISTRY=OFF >/dev/null
cmake --build "$build" -j "$(nproc)"
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
# kiln_open_profile travels in ci/gpu-profile-stage.sh's stage: with it this one no longer fits the 64 MiB a call carries.
cp "$build"/bin/{kiln,kiln_gpu_tests,kiln_backend_tests,kiln_runtime_bench,kiln_bench,kiln_c_api_test,kiln_runtime_api_tests,matmul_demo_c,matmul_demo_cpp} "$stage/bin/"
# The current library and its two links only: an older libkiln.so.0.x.y left in the build folder
# would take megabytes of the 64 MiB the device tool carries.
cp -P "$build"/lib/libkiln.so "$build"/lib/libkiln.so.0 "$(readlink -f "$build"/lib/libkiln.so.0)" "$stage/lib/"
# kiln._fastlaunch (packager/python/CMakeLists.txt), abi3 for CPython >= 3.11 (the GPU machine
# runs 3.12): beside libkiln, where kiln/_capi.py finds it with PYTHONPATH=packager/python and
# KILN_LIBRARY=$stage/lib/libkiln.so.0 (ci/gpu-run.sh). Built wherever python3-dev is installed.
cp "$build/lib/_fastlaunch.abi3.so" "$stage/lib/"
cp -r "$build/tests/archives" "$build/tests/keys" "$stage/"
# Real code objects for the backend conformance suite (tests/unit/backend_conformance_test.cpp):
# nvcc's sm_90a cubin and hipcc's gfx90a bundle of the example matmul.
mkdir -p "$stage/codeobjects"
cp "$build"/examples/cuda_matmul_relu/matmul_relu.sm_90a.cubin "$stage/codeobjects/"
cp "$build"/examples/cuda_matmul_relu/matmul_relu.gfx90a_xnack-.co "$stage/codeobjects/" 2>/dev/null || true
# A sparse copy of matmul-relu.kiln pulled for sm_90 (kiln pull --target sm_90 --tests), by the
# development build's kiln (KILN_PULL_WITH; this build has no registry client), from a local
# registry; the GPU run proves it with kiln verify --run.
ci/gpu-sparse-stage.sh "${KILN_PULL_WITH:-build/bin/kiln}" "$stage/archives/matmul-relu.kiln" "$stage/keys" \
  "$stage/archives/matmul-relu-sm_90-sparse.kiln"
# The benchmark's code objects (tests/bench/run.sh packs its archives from them on the GPU
# machine, gigabytes that could not travel), and Google Benchmark's library, which it lacks.
mkdir -p "$stage/bench" && cp "$build"/tests/bench/{noop,big}.{sm_80,sm_90a,sm_100}.cubin \
  "$build"/tests/bench/{noop,big}.compute_90.ptx "$stage/bench/"
cp "$build/examples/cuda_tma_cluster/tma_pair_sum.sm_90a.cubin" "$build/tests/archives/tma-pair-sum.kiln" "$stage/bench/"
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian /usr/lib/x86_64-linux-gnu/libzstd.so.1 "$stage/lib/"
cp /usr/bin/zstd "$stage/bin/"  # the pack benchmark's baseline
# A Triton archive packed here from an export made on the GPU machine (examples/triton):
# KILN_TRITON_ARCHIVE=path/to/matmul-relu-triton.kiln ci/gpu-build.sh
# It is countersigned with this build's test key (kiln sign: the digest does not change), so the
# GPU run trusts it through the same key as the other test archives.
if [ -n "${KILN_TRITON_ARCHIVE:-}" ]; then
  cp "$KILN_TRITON_ARCHIVE" "$stage/archives/matmul-relu-triton.kiln"
  "$build/bin/kiln" sign "$stage/archives/matmul-relu-triton.kiln" --key "$build/tests/keys/test.key" --signer gpu-run
fi
if [ -n "${KILN_TILELANG_ARCHIVE:-}" ]; then
  cp "$KILN_TILELANG_ARCHIVE" "$stage/archives/matmul-relu-tilelang.kiln"
  "$build/bin/kiln" sign "$stage/archives/matmul-relu-tilelang.kiln" --key "$build/tests/keys/test.key" --signer gpu-run
fi
# libkiln is built with -g in every build type (the ABI check reads its DWARF); the GPU run needs
# none of it, and the device tool carries at most 64 MiB.
find "$stage/bin" "$stage/lib" -type f -exec strip --strip-debug {} + 2>/dev/null || true
grep -qx '/.gpu-stage/' .git/info/exclude 2>/dev/null || echo '/.gpu-stage/' >> .git/info/exclude
# The stage is over the 64 MiB a device call carries once its test binaries link the store
# (OpenSSL inside each): it travels as one xz tarball, and the call unpacks it first:
#   <device run, carry .gpu-stage.tar.xz>: tar -xJf .gpu-stage.tar.xz && ci/gpu-run.sh
tar -cf - .gpu-stage | xz -T"$(nproc)" -6 > .gpu-stage.tar.xz
grep -qx '/.gpu-stage.tar.xz' .git/info/exclude 2>/dev/null || echo '/.gpu-stage.tar.xz' >> .git/info/exclude
echo "staged $(du -sh "$stage" | cut -f1) in $stage ($(du -sh .gpu-stage.tar.xz | cut -f1) as .gpu-stage.tar.xz); libkiln needs: $(readelf -d "$stage"/lib/libkiln.so | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
