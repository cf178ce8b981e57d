#!/usr/bin/env bash
# Where libkiln's cold start goes, on the GPU machine, in one call over what ci/gpu-build.sh
# staged: packs a 1-kernel and a 5,000-kernel archive of the no-op kernel (four targets each, as
# tests/bench/run.sh does), runs kiln_open_profile on both (signature memo cleared each time, and
# not), then again under `perf record` and prints perf's top symbols; then kiln_cold_anatomy takes
# both sides of the cold-start row apart. Prints the phase tables last.
#   ci/gpu-profile.sh [REPS]    (default 3000)
# KILN_STAGE names the staged folder (.gpu-stage by default; ci/gpu-profile-stage.sh makes
# .gpu-prof, which brings perf and its libraries in tools/: the GPU machine has none).
# The whole output also goes to $OUT/gpu-profile.log (the device tool's output folder; /tmp
# without one): the perf listings are longer than what a call prints back.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$(pwd)/${KILN_STAGE:-.gpu-stage}
reps=${1:-3000}
work=/tmp/kiln-profile
out=${OUT:-/tmp}
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$work"
exec > >(tee "$out/gpu-profile.log") 2>&1
echo "date: $(date -u +%FT%TZ); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
code=$stage/bench
for n in 1 5000; do
  [ -f "$work/small-$n.kiln" ] && continue
  python3 tests/bench/make_many_kernels.py "$work/src-$n" "$n" sm_80="$code/noop.sm_80.cubin" sm_90a="$code/noop.sm_90a.cubin" \
    sm_100="$code/noop.sm_100.cubin" compute_90="$code/noop.compute_90.ptx" >/dev/null
  "$stage/bin/kiln" pack "$work/src-$n/kiln.toml" --key "$stage/keys/test.key" -o "$work/small-$n.kiln" -l 1 -j "$(nproc)" -q >/dev/null || exit 1
done
profile() { "$stage/bin/kiln_open_profile" "$work/small-$1.kiln" "$stage/keys/test.pub" "noop_$(printf %05d $(($1 / 2)))" "$reps" "${@:2}"; }
table=()
for n in 1 5000; do
  for mode in --uncached ""; do
    profile "$n" $mode > "$work/phases.txt" || exit 1
    table+=("$(cat "$work/phases.txt")")
  done
done
perf=perf
if [ -x "$stage/tools/perf" ]; then
  perf="$stage/tools/perf"
  export LD_LIBRARY_PATH="$stage/tools/lib:$LD_LIBRARY_PATH"
fi
if command -v "$perf" >/dev/null; then
  for n in 1 5000; do
    for mode in --uncached ""; do
      name="small-$n${mode:+-uncached}"
      "$perf" record -q -e cpu-clock -F 20000 --call-graph dwarf,16384 -o "$work/$name.perf" "$stage/bin/kiln_open_profile" "$work/small-$n.kiln" "$stage/keys/test.pub" \
        "noop_$(printf %05d $((n / 2)))" "$reps" $mode >/dev/null 2>&1 || echo "perf record failed for $name"
      echo "===== perf: $name, self time by shared object and symbol (top 45)"
      "$perf" report -i "$work/$name.perf" --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep '%' | head -45
      echo "===== perf: $name, time including callees, kiln's functions (top 40)"
      "$perf" report -i "$work/$name.perf" --children --sort sym --stdio -g none 2>/dev/null | grep '%' | grep -E 'kiln|EVP|ZSTD|cu[A-Z]|sha|ossl|ed25519|malloc|free|read|open|mmap|munmap' | head -40
    done
  done
else
  echo "perf is not installed here: phases only"
fi
# Both sides of the cold-start row taken apart, interleaved as kiln_runtime_bench runs them.
anatomy=$("$stage/bin/kiln_cold_anatomy" "$work/small-1.kiln" "$stage/keys/test.pub" noop_00000 "$code/noop.sm_90a.cubin" noop 301 2>&1) ||
  echo "kiln_cold_anatomy failed"
echo
echo "cold start phases (kiln_open_profile, $reps repetitions each)"
printf '%s\n' "${table[@]}"
printf '%s\n' "$anatomy"
