#!/usr/bin/env bash
# Stages what ci/gpu-pack-ab.sh needs into .gpu-ab/ (.gpu-stage has no room for a second kiln
# under the 64 MiB the device tool carries): the kiln ci/gpu-build.sh staged as bin/kiln, the
# kiln to compare it with as bin/kiln-old, zstd and its library, and the test key. Run after
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
grep -qx '/.gpu-ab/' .git/info/exclude 2>/dev/null || echo '/.gpu-ab/' >> .git/info/exclude
echo "staged $(du -sh "$ab" | cut -f1) in $ab"
