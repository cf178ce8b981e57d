#!/usr/bin/env bash
# Stages what ci/gpu-app-boot.sh needs on the GPU machine into .gpu-stage-app/: libkiln and the
# kiln command built here (Release, OpenSSL/zstd/libstdc++ linked statically, as ci/gpu-build.sh
# builds them) and kiln._fastlaunch, and TileLang, which the GPU machine lacks, as one xz tarball of
# its wheels unpacked (TileLang 0.1.15 and the three it needs that the machine lacks; about 38 MB,
# under the 64 MiB a call carries; made once, kept in .gpu-stage-tilelang/). The Python package
# itself travels as the source tree.
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
tl=.gpu-stage-tilelang
if [ ! -s "$tl/tilelang-site.tar.xz" ]; then
  rm -rf "$tl" && mkdir -p "$tl/wheels" "$tl/site"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$tl/wheels" \
    tilelang==0.1.15 apache-tvm-ffi==0.1.12 z3-solver==4.15.4.0 torch-c-dlpack-ext==0.1.5
  for w in "$tl"/wheels/*.whl; do (cd "$tl/site" && unzip -q -o "../wheels/$(basename "$w")"); done
  # Not needed to import or run TileLang: z3's headers and tools; its library twice (a link suffices).
  rm -rf "$tl"/site/z3_solver-*.data
  ln -sf libz3.so.4.15 "$tl/site/z3/lib/libz3.so"
  tar -C "$tl/site" -cf - . | xz -T"$(nproc)" -6 > "$tl/tilelang-site.tar.xz"
  rm -rf "$tl/site" "$tl/wheels"
fi
cp "$tl/tilelang-site.tar.xz" "$stage/"
grep -qx '/.gpu-stage-tilelang/' .git/info/exclude 2>/dev/null || echo '/.gpu-stage-tilelang/' >> .git/info/exclude
grep -qx '/.gpu-stage-app/' .git/info/exclude 2>/dev/null || echo '/.gpu-stage-app/' >> .git/info/exclude
echo "staged $(du -sh "$stage" | cut -f1) in $stage"
