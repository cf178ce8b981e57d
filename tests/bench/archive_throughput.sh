#!/usr/bin/env bash
# Pack and verify throughput on ~1 GiB of real NVIDIA code objects (the CUDA toolkit's own
# libraries), side by side with zstd and openssl on the same bytes, in the same run.
#   usage: tests/bench/archive_throughput.sh [BUILD_DIR]
# Two corpus shapes: ~16k small code objects (one per fatbin entry), and the same entries
# gathered into ~64 MiB fatbins. Each figure is the best of 3 runs with a warm page cache.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
kiln="$build/bin/kiln"
work="$build/bench-archive"
level=9
cores=$(nproc)
mkdir -p "$work"
[ -f "$work/bench.key" ] || "$kiln" keygen --out "$work/bench" >/dev/null

best_of_3() {  # prints the best wall time in seconds of 3 runs of "$@"; a failing run fails the script
  local best="" t0 t1 log
  log=$(mktemp)
  for _ in 1 2 3; do
    t0=$(date +%s.%N)
    if ! "$@" >/dev/null 2>"$log"; then
      echo "archive_throughput.sh: failed: $*" >&2
      tail -n 20 "$log" >&2
      rm -f "$log"
      exit 1
    fi
    t1=$(date +%s.%N)
    best=$(python3 -c "t=$t1-$t0; b='$best'; print(t if b=='' or t<float(b) else b)")
  done
  rm -f "$log"
  echo "$best"
}

report() {  # report SHAPE BYTES ARCHIVE_BYTES ZST_BYTES FILES T_ZSTD1 T_ZSTDN T_PACK1 T_PACKN T_SHA T_VER1 T_VERN
  python3 - "$cores" "$level" "$@" <<'PY'
import sys
cores, level, shape = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
b, ab, zb, files = (int(x) for x in sys.argv[4:8])
z1, zn, p1, pn, sha, v1, vn = (float(x) for x in sys.argv[8:15])
print(f"\n[{shape}] {files} code objects, {b / 2**20:.0f} MiB in; archive {ab / 2**20:.0f} MiB; "
      f"zstd -{level} output {zb / 2**20:.0f} MiB; {cores} cores")
print(f"{'operation':42} {'seconds':>8} {'throughput':>12} {'ratio':>8}")
rows = [
    (f"zstd -{level} -T1 (baseline)", z1, b, None),
    (f"kiln pack -l {level} -j 1", p1, b, p1 / z1),
    (f"zstd -{level} -T{cores} (baseline)", zn, b, None),
    (f"kiln pack -l {level} -j {cores}", pn, b, pn / zn),
    ("openssl dgst -sha256 (baseline)", sha, ab, None),
    ("kiln verify -j 1", v1, ab, v1 / sha),
    (f"kiln verify -j {cores}", vn, ab, vn / sha),
]
for name, t, n, ratio in rows:
    rate = f"{n / t / 2**20:.0f} MiB/s"
    print(f"{name:42} {t:8.3f} {rate:>12} {'' if ratio is None else f'{ratio:.2f}x':>8}")
PY
}

run_shape() {  # run_shape NAME [corpus options]
  local shape=$1; shift
  local corpus="$work/$shape" archive="$work/$shape.kiln"
  [ -f "$corpus/kiln.toml" ] || python3 "$root/tests/bench/make_cuda_corpus.py" "$corpus" "$@"
  # The baselines read the same bytes, as one file.
  [ -f "$corpus.bin" ] || find "$corpus/code" -type f -print0 | sort -z | xargs -0 cat > "$corpus.bin"
  local bytes files
  bytes=$(stat -c %s "$corpus.bin")
  files=$(find "$corpus/code" -type f | wc -l)
  cat "$corpus.bin" "$corpus"/code/* > /dev/null 2>&1 || true  # warm the page cache

  local z1 zn p1 pn sha v1 vn
  z1=$(best_of_3 zstd -q -f -$level -T1 "$corpus.bin" -o "$corpus.zst")
  zn=$(best_of_3 zstd -q -f -$level -T"$cores" "$corpus.bin" -o "$corpus.zst")
  p1=$(best_of_3 "$kiln" pack "$corpus/kiln.toml" --key "$work/bench.key" -o "$archive" -l $level -j 1 -q)
  pn=$(best_of_3 "$kiln" pack "$corpus/kiln.toml" --key "$work/bench.key" -o "$archive" -l $level -j "$cores" -q)
  cat "$archive" > /dev/null
  sha=$(best_of_3 openssl dgst -sha256 "$archive")
  v1=$(best_of_3 "$kiln" verify "$archive" --trust "$work/bench.pub" -j 1)
  vn=$(best_of_3 "$kiln" verify "$archive" --trust "$work/bench.pub" -j "$cores")
  # The figures mean nothing unless the archive really verifies.
  "$kiln" verify "$archive" --trust "$work/bench.pub" -j "$cores" >/dev/null
  report "$shape" "$bytes" "$(stat -c %s "$archive")" "$(stat -c %s "$corpus.zst")" "$files" \
    "$z1" "$zn" "$p1" "$pn" "$sha" "$v1" "$vn"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $cores cores; $(date -u +%F)"
run_shape many-small                              # one code object per fatbin entry (~16k)
run_shape few-large --group-bytes $((64 << 20))   # the same entries in ~64 MiB fatbins
echo
echo "goals: pack within 1.2x of zstd at the same level; verify no slower than openssl on one core, faster on two or more"
