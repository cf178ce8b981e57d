#!/usr/bin/env bash
# kiln's main job in one screen: build kiln and the example matmul + ReLU kernel (real sm_80 and
# sm_90a cubins and compute_90 PTX from nvcc), seal it into a signed archive, verify it, show
# its digest and contents, open it through libkiln as a serving process would and show the route
# its kernel takes on this machine and why, then change one byte and watch verification refuse
# it, naming the member. Works with or without a GPU. Run ci/install-deps.sh first (the README's
# first set-up command does both); the first build takes about 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
demo=$build/demo
log=$build/demo-build.log
mkdir -p "$build"
bold=$'\033[1m' plain=$'\033[0m'
[ -t 1 ] || bold='' plain=''
say() { printf '\n%s# %s%s\n' "$bold" "$*" "$plain"; }
# show COMMAND...: prints the command as one would type it from the repository's root, then runs it.
show() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }

. ci/progress.sh
build_all() {
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target kiln matmul_demo_c example_cuda_matmul_relu
}
start=$SECONDS
printf 'building kiln and the example kernel (log: %s) ... ' "$log"
: > "$log"
if ! progress_run "$log" build_all; then
  echo "FAILED"; tail -n 20 "$log"; echo "demo: the build failed; the whole log is $log" >&2; exit 1
fi
nvcc=$(sed -n 's/^KILN_NVCC:FILEPATH=//p' "$build/CMakeCache.txt")
if [ ! -f "$build/examples/cuda_matmul_relu/kiln.toml" ]; then
  echo "no nvcc"
  echo "demo: the example's cubins and PTX are built by nvcc, and none was found." >&2
  echo "demo: ./ci/install-deps.sh installs NVIDIA's nvcc wheels into .cuda/ when no CUDA toolkit is present." >&2
  exit 1
fi
echo "done in $((SECONDS - start)) s (nvcc: ${nvcc#"$PWD/"})"
example=$build/examples/cuda_matmul_relu
kiln=$build/bin/kiln
rm -rf "$demo" && mkdir -p "$demo"

say "1. A release key, then seal the kernel: two cubins, PTX, source, test vectors, manifest"
show "$kiln" keygen --out "$demo/release"
show "$kiln" pack "$example/kiln.toml" --key "$demo/release.key" -o "$demo/matmul-relu.kiln"

say "2. Verify: the signature, then every member's digest; the digest is the archive's name"
show "$kiln" verify "$demo/matmul-relu.kiln" --trust "$demo/release.pub"

say "3. What is inside (the list of members, which follows, left out here)"
printf '%s$ %s%s\n' "$bold" "$kiln inspect $demo/matmul-relu.kiln | sed '/^  members/q'" "$plain"
"$kiln" inspect "$demo/matmul-relu.kiln" | sed '/^  members/q'

say "4. Open it through libkiln as a server would: which route does the kernel take here, and why?"
show "$build/bin/matmul_demo_c" "$demo/matmul-relu.kiln" "$demo/release.pub"

say "5. Change one byte inside the sm_90a cubin, and verify again"
offset=$("$kiln" inspect "$demo/matmul-relu.kiln" --json | python3 -c '
import json, sys
m = [m for m in json.load(sys.stdin)["members"] if m["path"].endswith("sm_90a.cubin")][0]
print(m["offset"] + m["stored_size"] // 2)')
cp "$demo/matmul-relu.kiln" "$demo/tampered.kiln"
printf '\x5a' | dd of="$demo/tampered.kiln" bs=1 seek="$offset" conv=notrunc status=none
set +e
show "$kiln" verify "$demo/tampered.kiln" --trust "$demo/release.pub"
status=$?
set -e
echo "exit status $status (1 = refused)"
[ "$status" -eq 1 ]

echo
echo "demo done in $((SECONDS - start)) s. Next: build examples/c against the installed library and use the Python package from a venv (README.md: Install, From Python), or on a GPU: $kiln verify $demo/matmul-relu.kiln --trust $demo/release.pub --run"
