#!/usr/bin/env bash
# Stages what ci/gpu-app-boot.sh needs on the GPU machine into .gpu-stage-app/: libkiln and the
# kiln command built here (Release, OpenSSL/zstd/libstdc++ linked statically, as ci/gpu-build.sh
# builds them) and kiln._fastlaunch. The Python package itself travels as the source tree.
#   ci/gpu-app-boot-stage.sh && <device run, carry .gpu-stage-app>: ci/gpu-app-boot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
stage=.gpu-stage-app
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_STATIC_DEPS=ON -DKILN_REGISTRY=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target libkiln kiln kiln_fastlaunch
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
cp "$build/bin/kiln" "$stage/bin/"
cp -P "$build"/lib/libkiln.so "$build"/lib/libkiln.so.0 "$(readlink -f "$build"/lib/libkiln.so.0)" "$stage/lib/"
cp "$build/lib/_fastlaunch.abi3.so" "$stage/lib/"
cp -L /usr/lib/x86_64-linux-gnu/libzstd.so.1 "$stage/lib/"
find "$stage/bin" "$stage/lib" -type f -exec strip --strip-debug {} + 2>/dev/null || true
grep -qx '/.gpu-stage-app/' .git/info/exclude 2>/dev/null || echo '/.gpu-stage-app/' >> .git/info/exclude
echo "staged $(du -sh "$stage" | cut -f1) in $stage"
