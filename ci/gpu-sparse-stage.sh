#!/usr/bin/env bash
# Stages a sparse archive for the GPU run: the test suite's matmul-relu.kiln (sm_80 and sm_90a
# cubins, compute_90 PTX, test vectors) pushed to a local registry (Debian's docker-registry) and
# pulled back with `kiln pull --target sm_90 --tests` by a kiln that has the registry client (the
# staged one is built without it). ci/gpu-run.sh then proves it on the H200 with kiln verify --run.
#   ci/gpu-sparse-stage.sh KILN ARCHIVE KEYS_DIR OUT.kiln
set -euo pipefail
kiln=$(realpath "$1") archive=$(realpath "$2") keys=$(realpath "$3") out=$4
command -v docker-registry >/dev/null || { echo "gpu-sparse-stage: docker-registry is not installed (ci/install-deps.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/kiln-gpu-sparse-XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s/storage\nhttp:\n  addr: 127.0.0.1:%s\n' \
  "$work" "$port" > "$work/config.yml"
docker-registry serve "$work/config.yml" > "$work/registry.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/')" 2>/dev/null && break
  sleep 0.1
done
"$kiln" push "$archive" "127.0.0.1:$port/gpu/matmul-relu:staged" > /dev/null
"$kiln" pull "127.0.0.1:$port/gpu/matmul-relu:staged" -o "$out" --trust "$keys/test.pub" --target sm_90 --tests
