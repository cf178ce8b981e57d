#!/usr/bin/env bash
# Per-GPU downloads: one archive of KERNELS kernels, each with a cubin for four targets (sm_80,
# sm_90a, sm_100a, sm_120: FlashInfer's store is per-architecture cubins of about 190 KB, 23,008 of
# them; this is that shape scaled down), pushed to a local registry (Debian's docker-registry) and
# pulled back whole (the baseline) and for each target alone (`kiln pull --target`), in the same
# run. Reports bytes received, requests and wall time of each pull, and checks that each sparse
# archive has the archive's digest and passes `kiln verify --deep` with the same key.
# A benchmark, not a test: figures go to tests/bench/RESULTS.md by hand.
#
#   tests/bench/sparse_pull.sh --kiln build/bin/kiln --keys build/tests/keys [--kernels 2000]
#                              [--payload-kib 48] [--work DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kiln="" keys="" kernels=2000 payload_kib=48 work=""
while [ $# -gt 0 ]; do
  case $1 in
    --kiln) kiln=$(realpath "$2"); shift 2 ;;
    --keys) keys=$(realpath "$2"); shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --payload-kib) payload_kib=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "sparse_pull.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$kiln" ] && [ -f "$keys/test.key" ] || { echo "sparse_pull.sh: --kiln BINARY and --keys DIR (test.key, test.pub) are required" >&2; exit 2; }
command -v docker-registry >/dev/null || { echo "sparse_pull.sh: docker-registry is not installed (ci/install-deps.sh)" >&2; exit 77; }
nvcc=$(command -v nvcc || true)
for n in "$here/../../.cuda/toolkit/bin/nvcc" /usr/local/cuda/bin/nvcc; do [ -n "$nvcc" ] || { [ -x "$n" ] && nvcc=$n; }; done
[ -n "$nvcc" ] || { echo "sparse_pull.sh: no nvcc (ci/install-deps.sh puts NVIDIA's in .cuda/)" >&2; exit 77; }
work=${work:-$(mktemp -d /tmp/kiln-sparse-XXXXXX)}
mkdir -p "$work" && rm -rf "${work:?}"/*
echo "sparse pull: $kernels kernels x 4 targets, ${payload_kib} KiB of payload per cubin, in $work"

# The cubins: one kernel with incompressible constant data (make_big_kernel.py), per target.
python3 "$here/make_big_kernel.py" "$work/big.cu" $((payload_kib * 1024))
codes=()
for arch in sm_80 sm_90a sm_100a sm_120; do
  "$nvcc" -cubin -arch="$arch" -o "$work/big.$arch.cubin" "$work/big.cu"
  codes+=("$arch=$work/big.$arch.cubin")
done
python3 "$here/make_many_kernels.py" "$work/pkg" "$kernels" "${codes[@]}"
"$kiln" pack "$work/pkg/kiln.toml" --key "$keys/test.key" -o "$work/fleet.kiln" --level 1 -q > /dev/null
whole_size=$(stat -c %s "$work/fleet.kiln")
digest=$("$kiln" digest "$work/fleet.kiln")

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/registry"
cat > "$work/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $work/registry/storage
http:
  addr: 127.0.0.1:$port
EOF
docker-registry serve "$work/registry/config.yml" > "$work/registry.log" 2>&1 &
registry_pid=$!
trap 'kill $registry_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/')" 2>/dev/null && break
  sleep 0.1
done
repo=127.0.0.1:$port/fleet/kernels
"$kiln" push "$work/fleet.kiln" "$repo:v1" > /dev/null

# pull NAME ARGS...: one pull, its row: bytes received, requests, seconds, file size.
rows=()
pull() {
  local name=$1; shift
  local out=$work/$name.kiln t0 t1 stats
  rm -f "$out"
  t0=$(date +%s.%N)
  "$kiln" pull "$repo:v1" -o "$out" --trust "$keys/test.pub" --stats "$@" > "$work/$name.out" 2> "$work/$name.err"
  t1=$(date +%s.%N)
  stats=$(grep kiln-registry-stats "$work/$name.err")
  local bytes requests
  bytes=$(sed -n 's/.*bytes_received=\([0-9]*\).*/\1/p' <<< "$stats")
  requests=$(sed -n 's/.*requests=\([0-9]*\) .*/\1/p' <<< "$stats")
  [ "$("$kiln" digest "$out")" = "$digest" ] || { echo "$name: another digest" >&2; exit 1; }
  "$kiln" verify "$out" --deep --trust "$keys/test.pub" > /dev/null || { echo "$name: kiln verify refused it" >&2; exit 1; }
  rows+=("$(printf '%-16s %14s %9s %8.2f %14s %7.4f' "$name" "$bytes" "$requests" "$(echo "$t1 - $t0" | bc)" \
            "$(stat -c %s "$out")" "$(echo "scale=4; $bytes / $whole_size" | bc)")")
}
pull whole
for t in sm_80 sm_90 sm_100 sm_120; do pull "$t" --target "$t"; done
pull sm_90+tests --target sm_90 --tests

code_bytes=$("$kiln" inspect --json "$work/fleet.kiln" | python3 -c '
import json, sys
print(sum(m["stored_size"] for m in json.load(sys.stdin)["members"] if m["role"] == "code"))')
echo
echo "archive: $whole_size bytes, of which code $code_bytes bytes; 1/4 of the code: $((code_bytes / 4)) bytes;"
echo "goal per target: at most 1/4 of the whole + 5% of it = $((whole_size * 30 / 100)) bytes"
printf '%-16s %14s %9s %8s %14s %7s\n' pull bytes_received requests seconds file_bytes share
for r in "${rows[@]}"; do echo "$r"; done
