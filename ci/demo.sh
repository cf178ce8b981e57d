#!/usr/bin/env bash
# The main demo: build kiln, pack the example matmul + ReLU kernel, verify it, show its
# digest, open it through the runtime and show the route its kernel takes on this machine,
# then change one byte and watch verification refuse it. Run ci/install-deps.sh
# first (the README's first set-up command does both).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "demo: the example's cubins and PTX are built by nvcc (the CUDA toolkit), which is not installed here." >&2
  echo "demo: install the CUDA toolkit under /usr/local/cuda, or run the test suite: ./ci/test.sh" >&2
  exit 1
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
kiln="$build/bin/kiln"
example="$build/examples/cuda_matmul_relu"
demo="$build/demo"
rm -rf "$demo" && mkdir -p "$demo"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$kiln" keygen --out "$demo/release"
step "$kiln" pack "$example/kiln.toml" --key "$demo/release.key" -o "$demo/matmul-relu.kiln"
step "$kiln" verify "$demo/matmul-relu.kiln" --trust "$demo/release.pub"
step "$kiln" inspect "$demo/matmul-relu.kiln"
step "$kiln" digest "$demo/matmul-relu.kiln"

# Open it through libkiln, as a serving process would, and see which route the kernel takes
# on this machine (native or PTX-JIT on a GPU; the reference, with the reason, without one).
step "$build/bin/matmul_demo_c" "$demo/matmul-relu.kiln" "$demo/release.pub"

# Change one byte inside the sm_90a cubin member and verify again: refused, naming it.
offset=$("$kiln" inspect "$demo/matmul-relu.kiln" --json | python3 -c '
import json, sys
m = [m for m in json.load(sys.stdin)["members"] if m["path"].endswith("sm_90a.cubin")][0]
print(m["offset"] + m["stored_size"] // 2)')
cp "$demo/matmul-relu.kiln" "$demo/tampered.kiln"
printf '\x5a' | dd of="$demo/tampered.kiln" bs=1 seek="$offset" conv=notrunc status=none
printf '\n\033[1m# one byte changed at offset %s\033[0m' "$offset"
set +e
step "$kiln" verify "$demo/tampered.kiln" --trust "$demo/release.pub"
status=$?
set -e
echo "exit status $status (1 = refused)"
[ "$status" -eq 1 ]
