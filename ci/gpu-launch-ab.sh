#!/usr/bin/env bash
# Stages an A/B of kiln_kernel_launch between libkiln at OLD_COMMIT and the one ci/gpu-build.sh
# built from this tree, for one device call: both libraries (built alike: Release, dependencies
# linked statically), kiln_launch_ab (tests/bench/launch_ab.cpp), the 1-kernel no-op archive
# tests/bench/run.sh benchmarks and the tensor-map one, and the test key, in .gpu-ab2/. Run after
# ci/gpu-build.sh:
#   ci/gpu-launch-ab.sh OLD_COMMIT && <device run, carry .gpu-ab2>:
#     .gpu-ab2/kiln_launch_ab .gpu-ab2/old.so .gpu-ab2/new.so .gpu-ab2/test.pub .gpu-ab2/small-1.kiln .gpu-ab2/tma-pair-sum.kiln \
#       .gpu-ab2/noop.sm_90a.cubin
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: ci/gpu-launch-ab.sh OLD_COMMIT}
build=build-gpu
ab=.gpu-ab2
tree=$(mktemp -d /tmp/kiln-launch-ab.XXXXXX)
trap 'git worktree remove --force "$tree" 2>/dev/null || true' EXIT
git worktree add -q --detach "$tree" "$old"
cmake -S "$tree" -B "$tree/build-gpu" -DCMAKE_BUILD_TYPE=Release -DKILN_STATIC_DEPS=ON -DKILN_REGISTRY=OFF >/dev/null
cmake --build "$tree/build-gpu" -j "$(nproc)" --target libkiln >/dev/null
rm -rf "$ab" && mkdir -p "$ab"
cp "$(readlink -f "$tree/build-gpu/lib/libkiln.so")" "$ab/old.so"
cp "$(readlink -f "$build/lib/libkiln.so")" "$ab/new.so"
strip --strip-debug "$ab/old.so" "$ab/new.so"
cp "$build/bin/kiln_launch_ab" "$build/tests/keys/test.pub" "$build/tests/archives/tma-pair-sum.kiln" \
  "$build/tests/bench/noop.sm_90a.cubin" "$ab/"
python3 tests/bench/make_many_kernels.py "$ab/src" 1 sm_80="$build/tests/bench/noop.sm_80.cubin" \
  sm_90a="$build/tests/bench/noop.sm_90a.cubin" sm_100="$build/tests/bench/noop.sm_100.cubin" \
  compute_90="$build/tests/bench/noop.compute_90.ptx" >/dev/null
"$build/bin/kiln" pack "$ab/src/kiln.toml" --key "$build/tests/keys/test.key" -o "$ab/small-1.kiln" -l 1 -q >/dev/null
rm -rf "$ab/src"
grep -qx '/.gpu-ab2/' .git/info/exclude 2>/dev/null || echo '/.gpu-ab2/' >> .git/info/exclude
echo "staged $(du -sh "$ab" | cut -f1) in $ab (old: $old, new: this tree)"
