#!/usr/bin/env bash
# Stages what ci/gpu-profile.sh needs into .gpu-prof/ (the device tool carries at most 64 MiB,
# and .gpu-stage with perf would not fit): the kiln command, kiln_open_profile, kiln_cold_anatomy,
# the no-op kernel's code objects, the test keys, and this machine's perf with the libraries it loads
# (the GPU machine has no perf). Run after ci/gpu-build.sh:
#   ci/gpu-profile-stage.sh && <device run, carry .gpu-prof>: KILN_STAGE=.gpu-prof ci/gpu-profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=.gpu-stage
prof=.gpu-prof
rm -rf "$prof" && mkdir -p "$prof/bin" "$prof/bench" "$prof/keys" "$prof/tools/lib"
cp "$src"/bin/kiln "$prof/bin/"
# Not in .gpu-stage, which is near the 64 MiB the device tool carries: from ci/gpu-build.sh's build.
cp build-gpu/bin/{kiln_open_profile,kiln_cold_anatomy} "$prof/bin/"
# Without their debug sections (perf names functions from the symbol table and unwinds through
# .eh_frame), or the stage passes the 64 MiB.
strip --strip-debug "$prof"/bin/*
cp "$src"/bench/noop.* "$prof/bench/"
cp "$src"/keys/test.{pub,key} "$prof/keys/"
perf=$(readlink -f "$(command -v perf)")
cp "$perf" "$prof/tools/perf"
# Every library perf loads but the C and C++ runtime, which the GPU machine has (newer).
ldd "$perf" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl)\.so' |
  while read -r lib; do cp -L "$lib" "$prof/tools/lib/"; done
grep -qx '/.gpu-prof/' .git/info/exclude 2>/dev/null || echo '/.gpu-prof/' >> .git/info/exclude
echo "staged $(du -sh "$prof" | cut -f1) in $prof"
