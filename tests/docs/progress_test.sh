#!/usr/bin/env bash
# ctest ci_progress_reports_a_running_step: ci/progress.sh, which the README's set-up commands
# (install-deps, the demo's build) run their long steps through, says that a step runs: on a
# terminal (script(1) gives it one) the time so far and the build's percentage from its log; the
# step's own status comes back (a failure stays a failure).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v script >/dev/null || { echo "SKIPPED: no script(1) (util-linux)"; exit 77; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
out=$(script -qec "bash -c '. \"$root/ci/progress.sh\"; progress_run \"$log\" bash -c \"echo [ 42%] Building; sleep 6\"'" /dev/null)
grep -q '(5 s, 42%)' <<<"$out" || { echo "no progress line in: $(cat -v <<<"$out")"; exit 1; }
grep -q 'Building' "$log" || { echo "the step's output did not reach its log"; exit 1; }
if bash -c ". \"$root/ci/progress.sh\"; progress_run \"$log\" bash -c 'exit 3'"; then
  echo "a failed step was reported as passing"; exit 1
fi
echo "progress_run: says a step runs (time, percentage) and returns its status"
