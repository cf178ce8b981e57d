#!/usr/bin/env bash
# Fleet simulation: N node processes, each with its own store, pull one release from a
# local registry (Debian's docker-registry) at the same time and activate it; then a second
# release is pushed and every node pulls and activates it; then every node rolls back. After each
# phase every node must be on the same digest. Reports wall time per phase, bytes pulled and
# request counts, both as the nodes counted them (kiln --stats) and as the registry logged them.
# A benchmark, not a test: figures go to tests/bench/RESULTS.md by hand.
#
#   tests/bench/fleet.sh --kiln build/bin/kiln --keys build/tests/keys [--nodes 50] [--bulk-mib 4] [--work DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kiln="" keys="" nodes=50 bulk_mib=4 work=""
while [ $# -gt 0 ]; do
  case $1 in
    --kiln) kiln=$(realpath "$2"); shift 2 ;;
    --keys) keys=$(realpath "$2"); shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --bulk-mib) bulk_mib=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "fleet.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$kiln" ] && [ -f "$keys/test.key" ] || { echo "fleet.sh: --kiln BINARY and --keys DIR (test.key, test.pub) are required" >&2; exit 2; }
command -v docker-registry >/dev/null || { echo "fleet.sh: docker-registry is not installed (ci/install-deps.sh)" >&2; exit 77; }
work=${work:-$(mktemp -d /tmp/kiln-fleet-XXXXXX)}
mkdir -p "$work" && rm -rf "${work:?}"/*
echo "fleet: $nodes nodes, work folder $work"

# Two releases of package "scale" (sequence 1 and 2), each carrying $bulk_mib MiB of
# incompressible bytes, so that the transfer is what is measured.
for r in 1 2; do
  mkdir -p "$work/pkg$r"
  sed -e "s/^kernel_revision = .*/kernel_revision = \"r$r\"/" -e "s/^sequence = .*/sequence = $r/" \
    "$here/../data/scale/kiln.toml" > "$work/pkg$r/kiln.toml"
  printf '\n[files]\nextra = ["bulk.bin"]\n' >> "$work/pkg$r/kiln.toml"
  cp "$here/../data/scale/scale.ptx" "$work/pkg$r/"
  head -c $((bulk_mib << 20)) /dev/urandom > "$work/pkg$r/bulk.bin"
  "$kiln" pack "$work/pkg$r/kiln.toml" --key "$keys/test.key" -o "$work/r$r.kiln" -q > /dev/null
done

# The registry, on a free port, its access log in registry.log.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/registry"
cat > "$work/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: false
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
repo=127.0.0.1:$port/fleet/scale

for i in $(seq "$nodes"); do "$kiln" store init --store "$work/node$i" --trust "$keys/test.pub" >/dev/null; done

now() { date +%s.%N; }
# phase NAME DIGEST COMMAND...: runs COMMAND (NODE replaced by each node's store) on every node at
# once, prints the phase's row, and fails unless every node succeeded and is on DIGEST.
phase() {
  local name=$1 want=$2; shift 2
  local log_start; log_start=$(wc -l < "$work/registry.log")
  local t0; t0=$(now)
  local pids=()
  for i in $(seq "$nodes"); do
    local args=("${@//NODE/$work/node$i}")
    "$kiln" "${args[@]}" > "$work/$name.node$i.out" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  local t1; t1=$(now)
  local actives; actives=$(for i in $(seq "$nodes"); do "$kiln" store active scale --store "$work/node$i"; done | sort | uniq -c)
  python3 - "$work" "$name" "$nodes" "$t0" "$t1" "$failed" "$log_start" "$actives" <<'PY'
import re, sys, glob
work, name, nodes, t0, t1, failed, log_start, actives = sys.argv[1:]
stats = {}
for path in glob.glob(f"{work}/{name}.node*.out"):
    for line in open(path):
        if line.startswith("kiln-registry-stats"):
            for kv in line.split()[1:]:
                k, v = kv.split("=")
                stats[k] = stats.get(k, 0) + int(v)
served = {}
bytes_served = 0
access = re.compile(r'"(GET|HEAD|PUT|POST|PATCH|DELETE) (\S+) HTTP/[0-9.]+" (\d{3}) (\d+|-)')
for line in open(f"{work}/registry.log").readlines()[int(log_start):]:
    m = access.search(line)
    if not m:
        continue
    method, uri, status, size = m.groups()
    kind = "manifests" if "/manifests/" in uri else "blobs" if "/blobs/" in uri else "other"
    key = f"{method} {kind} {status}"
    served[key] = served.get(key, 0) + 1
    bytes_served += 0 if size == "-" else int(size)
distinct = len(actives.strip().splitlines())
print(f"| {name} | {nodes} | {float(t1) - float(t0):.2f} s | {failed} | {distinct} | "
      f"{stats.get('bytes_received', 0) / 2**20:.1f} MiB | {stats.get('requests', 0)} | "
      f"{bytes_served / 2**20:.1f} MiB | {', '.join(f'{k}: {v}' for k, v in sorted(served.items())) or '-'} |")
print(f"  active after {name}: {actives.strip()}", file=sys.stderr)
PY
  [ "$failed" -eq 0 ] && [ "$(echo "$actives" | awk '{print $2}')" = "$want" ] ||
    { echo "fleet.sh: $name did not converge on $want: $failed failed; $actives" >&2; exit 1; }
}

echo
push1=$("$kiln" push "$work/r1.kiln" "$repo" --stats 2>&1)
d1=$("$kiln" digest "$work/r1.kiln")
d2=$("$kiln" digest "$work/r2.kiln")
echo "| phase | nodes | wall | failed | distinct active digests | bytes pulled (kiln --stats) | requests (kiln) | bytes served (registry log) | requests served (registry log) |"
echo "|---|---|---|---|---|---|---|---|---|"
phase pull-r1 "$d1" store pull --store NODE "$repo:r1" --activate --who fleet --stats
push2=$("$kiln" push "$work/r2.kiln" "$repo" --stats 2>&1)
phase pull-r2 "$d2" store pull --store NODE "$repo:r2" --activate --who fleet --stats
phase rollback "$d1" store rollback scale --store NODE --who fleet --reason "fleet rollback"
echo
echo "r1 $d1 ($(stat -c %s "$work/r1.kiln") bytes), r2 $d2 ($(stat -c %s "$work/r2.kiln") bytes)"
echo "push r1: $(echo "$push1" | grep -E 'kiln-registry-stats|uploaded' | tr -s ' ' | tr '\n' ' ')"
echo "push r2: $(echo "$push2" | grep -E 'kiln-registry-stats|uploaded' | tr -s ' ' | tr '\n' ' ')"
echo "every phase converged: all $nodes nodes on r1, then r2, then r1 again after the rollback"
