#!/usr/bin/env bash
# kiln's benchmark harness: prepares the archives, runs kiln_bench (host side, Google Benchmark)
# and, with --gpu, kiln_runtime_bench (on a GPU), then prints one comparison table last.
#   tests/bench/run.sh --bin DIR --keys DIR --code DIR --work DIR [--counts "1 10 100 1000 5000"] [--gpu]
# Prepared archives are kept in the work folder and reused; results are kiln_bench.json (every
# repetition and the median aggregates report.py reads), *.rows.json, report.json (the table, with
# the machine and the date), report.md (the same table in Markdown: the run's summary for
# tests/bench/RESULTS.md) and scaling.csv there (tests/bench/plot_scaling.py draws the curves).
# Raw results stay in the work folder (or the device call's $OUT): none is written into the tree.
# --bin holds kiln, kiln_bench, kiln_runtime_bench; --keys test.key and test.pub; --code the
# code objects the build made in tests/bench (noop.* and big.*). After a build here:
#   tests/bench/run.sh --bin build/bin --keys build/tests/keys --code build/tests/bench --work /tmp/kb
# On the H200, ci/gpu-run.sh calls it with --gpu over what ci/gpu-build.sh staged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
counts="1 10 100 1000 5000"
gpu=0
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    --keys) keys=$(cd "$2" && pwd); shift 2 ;;
    --code) code=$(cd "$2" && pwd); shift 2 ;;
    --work) mkdir -p "$2"; work=$(cd "$2" && pwd); shift 2 ;;
    --counts) counts=$2; shift 2 ;;
    --gpu) gpu=1; shift ;;
    *) echo "run.sh: unknown argument '$1' (see the usage at the top of $0)"; exit 2 ;;
  esac
done
: "${bin:?--bin missing}" "${keys:?--keys missing}" "${code:?--code missing}" "${work:?--work missing}"
kiln="$bin/kiln"
export PATH="$bin:$PATH"  # a zstd staged beside kiln (the GPU machine has none) is the one used
cores=$(nproc)
cp "$keys/test.pub" "$keys/test.key" "$work/"
# The Hopper launch benchmark's archive and cubin, where the code folder has them (ci/gpu-build.sh
# stages them; the archive is signed with the same test key).
for f in tma-pair-sum.kiln tma_pair_sum.sm_90a.cubin; do [ -f "$code/$f" ] && cp "$code/$f" "$work/"; done
mkdir -p "$work/scale"

pack() {  # pack MANIFEST OUT LEVEL
  "$kiln" pack "$1" --key "$work/test.key" -o "$2" -l "$3" -j "$cores" -q >/dev/null
}

# Archives of N kernels, each with its own member for four targets (sm_80, sm_90a, sm_100
# cubins and compute_90 PTX): "small" from the no-op kernel (a few KiB per member), "big" from
# the kernel carrying 128 KiB of data (the 5,000-kernel one is gigabytes).
for shape in small big; do
  kernel=$([ $shape = small ] && echo noop || echo big)
  cp "$code/$kernel.sm_90a.cubin" "$work/scale/$shape.sm_90a.cubin"
  for n in $counts; do
    out="$work/scale/$shape-$n.kiln"
    [ -f "$out" ] && continue
    src="$work/src/$shape-$n"
    python3 "$here/make_many_kernels.py" "$src" "$n" sm_80="$code/$kernel.sm_80.cubin" \
      sm_90a="$code/$kernel.sm_90a.cubin" sm_100="$code/$kernel.sm_100.cubin" \
      compute_90="$code/$kernel.compute_90.ptx" >/dev/null
    t0=$(date +%s%N)
    pack "$src/kiln.toml" "$out" 1
    awk -v n="$shape-$n" -v b="$(stat -c %s "$out")" -v ns=$(($(date +%s%N) - t0)) \
      'BEGIN { printf "prepared %-14s %10.1f MiB, packed in %.1f s\n", n, b / 1048576, ns / 1e9 }'
    rm -rf "$src"
  done
done

# verify: a 1 GiB archive of big kernels (each kernel stores ~0.57 MiB over its four members).
if [ ! -f "$work/verify.kiln" ]; then
  python3 "$here/make_many_kernels.py" "$work/src/verify" 1840 sm_80="$code/big.sm_80.cubin" \
    sm_90a="$code/big.sm_90a.cubin" sm_100="$code/big.sm_100.cubin" compute_90="$code/big.compute_90.ptx" >/dev/null
  pack "$work/src/verify/kiln.toml" "$work/verify.kiln" 1
  rm -rf "$work/src/verify"
fi
echo "prepared verify.kiln $(($(stat -c %s "$work/verify.kiln") / 1048576)) MiB"

# pack: real NVIDIA code objects (the CUDA libraries' fatbin entries) and the same bytes as
# one file for zstd. Where no CUDA library is found the pack rows are reported as not run.
if [ ! -f "$work/pack/kiln.toml" ]; then
  libdirs=()
  pysite=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null || true)
  [ -n "$pysite" ] && libdirs=(--lib-dir "$pysite/nvidia")
  if python3 "$here/make_cuda_corpus.py" "$work/pack" --bytes $((512 << 20)) "${libdirs[@]}" >/dev/null 2>&1; then
    find "$work/pack/code" -type f | sort | xargs cat > "$work/pack.concat"
  else
    rm -rf "$work/pack"
    echo "pack corpus: no CUDA library with fatbins found; the pack benchmark is not run"
  fi
fi

# hot swap: a store with two releases of one package, the first active.
if [ $gpu = 1 ]; then
  rm -rf "$work/store" "$work/src/swap"
  mkdir -p "$work/src/swap"
  python3 "$here/make_many_kernels.py" "$work/src/swap" 1 sm_90a="$code/noop.sm_90a.cubin" >/dev/null
  for seq in 1 2; do
    sed "s/^sequence = .*/sequence = $seq/" "$work/src/swap/kiln.toml" > "$work/src/swap/kiln.$seq.toml"
    pack "$work/src/swap/kiln.$seq.toml" "$work/swap-$seq.kiln" 9
  done
  "$kiln" store init --store "$work/store" --trust "$work/test.pub" >/dev/null
  for seq in 1 2; do "$kiln" store add "$work/swap-$seq.kiln" --store "$work/store" >/dev/null; done
  "$kiln" store activate "$("$kiln" digest "$work/swap-1.kiln")" --store "$work/store" >/dev/null
  for seq in 1 2; do "$kiln" digest "$work/swap-$seq.kiln"; done > "$work/swap.digests"
fi

echo "== kiln_bench (host side)"
KILN_BINARY="$kiln" "$bin/kiln_bench" "$work" --benchmark_out="$work/kiln_bench.json" \
  --benchmark_out_format=json --benchmark_counters_tabular=true
if [ -f "$work/pack/kiln.toml" ]; then  # where a pack's time goes, at 1 and at all threads
  for t in 1 "$cores"; do
    "$kiln" pack "$work/pack/kiln.toml" --key "$work/test.key" -o "$work/pack.out.kiln" -l 9 -j "$t" -q --timings 2>&1 >/dev/null
  done
fi
if [ $gpu = 1 ]; then
  echo "== kiln_runtime_bench (GPU side)"
  KILN_BINARY="$kiln" "$bin/kiln_runtime_bench" "$work" "$work/runtime_bench.rows.json"
fi
# Rows from other programs of the same run (kiln_runtime_bench, python_launch_bench.py) are
# *.rows.json files in the work folder.
python3 "$here/report.py" "$work/kiln_bench.json" $(ls "$work"/*.rows.json 2>/dev/null) --csv "$work/scaling.csv" \
  --json "$work/report.json" --markdown "$work/report.md"
