#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time.
#   tests/fuzz/run.sh MAIN_BUILD_DIR [SECONDS_PER_TARGET]
# MAIN_BUILD_DIR is a finished ordinary build: its test archives, AMD code objects, .npy vectors
# and the examples' manifests seed the corpora. Inputs in tests/fuzz/regressions/<target>/
# (each one a crash found earlier) are replayed first. Targets run side by side, one per core
# (KILN_FUZZ_JOBS, default nproc; each libFuzzer process is single-threaded, so each target still
# has a core of its own for its SECONDS). Exits non-zero if any target crashed, leaving the input
# as crash-* in the target's work folder and naming it.
set -euo pipefail
cd "$(dirname "$0")/../.."
main_build=$(cd "${1:?usage: tests/fuzz/run.sh MAIN_BUILD_DIR [SECONDS]}" && pwd)
seconds=${2:-60}
fuzz_build=$main_build-fuzz
source tests/fuzz/build-targets.sh
build_fuzz_targets "$fuzz_build" \
  "-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  "-fsanitize=address,undefined"
targets=("${fuzz_targets[@]}")

seed() {  # seed TARGET: prints the seed files for TARGET, one per line; a folder the build
          # did not make (no hipcc, no nvcc) just gives fewer seeds
  case $1 in
    archive) find "$main_build/tests/archives" -name '*.kiln' ;;
    manifest) find examples tests/data "$main_build/tests/amd" -name 'kiln*.toml' ;;
    code_object) find "$main_build/tests/amd" "$main_build/examples" -type f \
                   \( -name '*.co' -o -name '*.ptx' -o -name '*.cubin' -o -name '*.fatbin' -o -name '*.hipfb' \) ;;
    npy) find tests/fuzz/seeds/npy "$main_build/examples" -name '*.npy' ;;
    oci_manifest) find tests/fuzz/seeds/oci_manifest -name '*.json' ;;
  esac 2>/dev/null || true
}

export KILN_FUZZ_TRUST="$main_build/tests/keys/test.pub"
export ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1"
jobs=${KILN_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}

# fuzz TARGET: replays the target's regressions, then fuzzes it for SECONDS from fresh seeds;
# writes its summary row to its work folder's row.txt, or says what crashed and returns 1.
fuzz() {
  local t=$1 work="$fuzz_build/work/$1" nseeds regressions execs cov
  rm -rf "$work"; mkdir -p "$work/corpus"
  # Seeds share names (every example has a kiln.toml): name each copy after its whole path.
  seed "$t" | while read -r f; do cp "$f" "$work/corpus/$(echo "$f" | tr / _)"; done
  nseeds=$(ls "$work/corpus" | wc -l)
  regressions=tests/fuzz/regressions/$t
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    "$fuzz_build/bin/kiln_fuzz_$t" "$regressions"/* > "$work/regressions.log" 2>&1 ||
      { cat "$work/regressions.log"; echo "fuzz: $t: a checked-in regression input fails again"; return 1; }
  fi
  echo "fuzz: $t for ${seconds}s from $nseeds seeds"
  if ! (cd "$work" && "$fuzz_build/bin/kiln_fuzz_$t" -max_total_time="$seconds" -max_len=1048576 \
          -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 corpus > run.log 2>&1); then
    tail -60 "$work/run.log"
    echo "fuzz: $t: crash; input saved as $(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -1)"
    echo "fuzz: add it under tests/fuzz/regressions/$t/ with the fix"
    return 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/run.log")
  cov=$(grep -o 'cov: [0-9]*' "$work/run.log" | tail -1 | cut -d' ' -f2)
  printf '%-12s %8s %10s %8s %s\n' "$t" "$nseeds" "$execs" "$cov" ok > "$work/row.txt"
}

status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
# The table in the targets' order, whatever order they finished in.
printf '%-12s %8s %10s %8s %s\n' target seeds execs cov result > "$fuzz_build/summary.txt"
for t in "${targets[@]}"; do
  cat "$fuzz_build/work/$t/row.txt" 2>/dev/null ||
    printf '%-12s %8s %10s %8s %s\n' "$t" - - - FAILED
done >> "$fuzz_build/summary.txt"
cat "$fuzz_build/summary.txt"
exit $status
