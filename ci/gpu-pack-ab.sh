#!/usr/bin/env bash
# kiln pack against itself at another commit and against zstd, on the GPU machine's CPU, in one
# call over what ci/gpu-pack-ab-stage.sh staged: builds the 512 MiB corpus of CUDA-library code
# objects the benchmark uses (tests/bench/make_cuda_corpus.py, from the pip CUDA libraries), then
# for each thread count runs old, new and `zstd -T` interleaved, REPS times each, for ROUNDS
# rounds, each under /usr/bin/time; checks that old and new wrote the same bytes; profiles the
# new kiln at the largest thread count where perf was staged; prints a table of medians last.
#   ci/gpu-pack-ab.sh [ROUNDS] [REPS] [THREADS...]    (default: 2 3 1 8 16)
# The whole output also goes to $OUT/gpu-pack-ab.log (the device tool's output folder; /tmp
# without one), the per-run times to $OUT/gpu-pack-ab.times.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$(pwd)/.gpu-ab
rounds=${1:-2}
reps=${2:-3}
shift 2 2>/dev/null || shift $#
threads=("${@:-}")
[ -n "${threads[0]}" ] || threads=(1 8 16)
work=/tmp/kiln-pack-ab
out=${OUT:-/tmp}
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$work"
exec > >(tee "$out/gpu-pack-ab.log") 2>&1
echo "date: $(date -u +%FT%TZ); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
if [ ! -f "$work/pack/kiln.toml" ]; then
  lib=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)/nvidia
  python3 tests/bench/make_cuda_corpus.py "$work/pack" --bytes $((512 << 20)) --lib-dir "$lib" >/dev/null || {
    echo "no corpus: make_cuda_corpus.py found no CUDA library under $lib"
    exit 1
  }
  find "$work/pack/code" -type f | sort | xargs cat > "$work/pack.concat"
fi
echo "corpus: $(find "$work/pack/code" -type f | wc -l) files, $(du -sh --apparent-size "$work/pack.concat" | cut -f1)"
timed() {  # timed LABEL CMD...: prints "wall sys" of one run, or FAIL
  /usr/bin/time -f '%e %S' -o "$work/time.txt" "$@" >/dev/null 2>"$work/err.txt" || { echo FAIL; cat "$work/err.txt" >&2; return 1; }
  cat "$work/time.txt"
}
results=$work/results.txt
: > "$results"
for round in $(seq 1 "$rounds"); do
  for t in "${threads[@]}"; do
    line="round $round -j $t |"
    for side in old new zstd; do
      runs=""
      for _ in $(seq 1 "$reps"); do
        case $side in
          old) r=$(timed "$stage/bin/kiln-old" pack "$work/pack/kiln.toml" --key "$stage/keys/test.key" -o "$work/old.kiln" -l 9 -j "$t" -q) ;;
          new) r=$(timed "$stage/bin/kiln" pack "$work/pack/kiln.toml" --key "$stage/keys/test.key" -o "$work/new.kiln" -l 9 -j "$t" -q) ;;
          zstd) r=$(timed "$stage/bin/zstd" -q -f -9 -T"$t" "$work/pack.concat" -o "$work/pack.concat.zst") ;;
        esac
        runs+=" $r"
        echo "$t $side $r" >> "$results"
      done
      line+=" $side:$runs |"
    done
    echo "$line"
  done
done
if cmp -s "$work/old.kiln" "$work/new.kiln"; then echo "old and new archives identical"; else echo "old and new archives DIFFER"; fi
"$stage/bin/kiln" pack "$work/pack/kiln.toml" --key "$stage/keys/test.key" -o "$work/new.kiln" -l 9 -j "${threads[-1]}" -q --timings 2>&1 >/dev/null | tail -3
if [ -x "$stage/tools/perf" ]; then
  # Where the new kiln's time goes at the largest thread count, kernel included: self time by
  # symbol, then time with callees for the system calls and faults it enters the kernel by.
  perf="env LD_LIBRARY_PATH=$stage/tools/lib:$LD_LIBRARY_PATH $stage/tools/perf"
  t=${threads[-1]}
  $perf record -q -g -F 1999 -o "$work/pack.perf" "$stage/bin/kiln" pack "$work/pack/kiln.toml" --key "$stage/keys/test.key" \
    -o "$work/new.kiln" -l 9 -j "$t" -q >/dev/null 2>&1 || echo "perf record failed"
  echo "===== perf, new kiln -j $t: self time by symbol (top 30)"
  $perf report -i "$work/pack.perf" --no-children --sort sym --stdio -g none 2>/dev/null | grep '%' | head -30
  echo "===== perf, new kiln -j $t: time with callees, ways into the kernel (top 25)"
  $perf report -i "$work/pack.perf" --children --sort sym --stdio -g none 2>/dev/null | grep '%' |
    grep -E '__x64_sys|do_syscall|exc_page_fault|asm_exc|do_user_addr_fault|asm_sysvec|irqentry' | head -25
fi
echo
echo "medians over ${rounds}x$reps runs: wall s (sys s)"
python3 - "$results" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    t, side, wall, sys_s = line.split()
    rows.setdefault(int(t), {}).setdefault(side, []).append((float(wall), float(sys_s)))
print(f"{'-j':>3} | {'old':>13} | {'new':>13} | {'zstd':>13} | old/zstd | new/zstd | new/old")
for t in sorted(rows):
    m = {s: (statistics.median(w for w, _ in v), statistics.median(x for _, x in v)) for s, v in rows[t].items()}
    cell = lambda s: f"{m[s][0]:6.2f} ({m[s][1]:4.2f})"
    print(f"{t:>3} | {cell('old')} | {cell('new')} | {cell('zstd')} | {m['old'][0] / m['zstd'][0]:8.2f} | "
          f"{m['new'][0] / m['zstd'][0]:8.2f} | {m['new'][0] / m['old'][0]:7.2f}")
PY
status=$?
cp "$results" "$out/gpu-pack-ab.times.txt" 2>/dev/null || true
exit $status
