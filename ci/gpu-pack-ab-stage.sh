#!/usr/bin/env bash
# Stages what ci/gpu-pack-ab.sh needs into .gpu-ab/ (.gpu-stage has no room for a second kiln
# under the 64 MiB the device tool carries): the kiln ci/gpu-build.sh staged as bin/kiln, the
# kiln to compare it with as bin/kiln-old, zstd and its library, the test key and perf. Run after
# ci/gpu-build.sh:
#   ci/gpu-pack-ab-stage.sh OLD_KILN && <device run, carry .gpu-ab>: ci/gpu-pack-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: ci/gpu-pack-ab-stage.sh OLD_KILN (a kiln binary built by ci/gpu-build.sh at another commit)}
src=.gpu-stage
ab=.gpu-ab
rm -rf "$ab" && mkdir -p "$ab/bin" "$ab/lib" "$ab/keys"
cp "$src/bin/kiln" "$src/bin/zstd" "$ab/bin/"
cp "$old" "$ab/bin/kiln-old"
strip "$ab/bin/kiln-old" 2>/dev/null || true
cp "$src/lib/libzstd.so.1" "$ab/lib/"
cp "$src/keys/test.key" "$ab/keys/"
# This machine's perf and the libraries it loads (the GPU machine has none), for the profile
# ci/gpu-pack-ab.sh takes of the new kiln at the largest thread count.
if perf=$(readlink -f "$(command -v perf)" 2>/dev/null) && [ -x "$perf" ]; then
  mkdir -p "$ab/tools/lib"
  cp "$perf" "$ab/tools/perf"
  ldd "$perf" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl)\.so' |
    while read -r lib; do cp -L "$lib" "$ab/tools/lib/"; done
fi
grep -qx '/.gpu-ab/' .git/info/exclude 2>/dev/null || echo '/.gpu-ab/' >> .git/info/exclude
echo "staged $(du -sh "$ab" | cut -f1) in $ab"
