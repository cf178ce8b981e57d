# Sourced by ci/install-deps.sh and ci/demo.sh. progress_run LOG COMMAND...: runs COMMAND with its
# output appended to LOG and, while it runs, says that it does: on a terminal a line rewritten every
# 5 s with the time so far and, from a build's log, how far the build is ("[ 45%]"); elsewhere (a
# CI log) the same every 60 s. Returns COMMAND's status. A long step never looks hung.
progress_run() {
  local log=$1 start=$SECONDS last=0 tty=0 now pct
  shift
  [ -t 1 ] && tty=1
  "$@" >> "$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    now=$((SECONDS - start))
    if { [ "$tty" = 1 ] && [ $((now - last)) -ge 5 ]; } || [ $((now - last)) -ge 60 ]; then
      last=$now
      pct=$(grep -o '^\[ *[0-9]*%\]' "$log" 2>/dev/null | tail -n 1 | tr -d '[ ]' || true)
      if [ "$tty" = 1 ]; then printf '\033[s(%d s%s)\033[u' "$now" "${pct:+, $pct}"; else printf '(%d s%s) ' "$now" "${pct:+, $pct}"; fi
    fi
  done
  local status=0
  wait "$pid" || status=$?
  [ "$tty" = 1 ] && printf '\033[K'
  return "$status"
}
