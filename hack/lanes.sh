#!/usr/bin/env bash
# Runs commands side by side as lanes, each with its own log, and says which failed.
#
#   hack/lanes.sh NAME 'COMMAND' [NAME 'COMMAND' ...]
#
# Each COMMAND runs in `bash -c` with its output in $CAPX_LANE_LOGS/NAME.log (default
# _artifacts/lanes/). When a lane ends, its whole log is printed in one block under a header
# (blocks never interleave), so a CI log reads as if the lanes had run one after the other, in
# the order they ended. While they run, a line every $CAPX_LANE_TICK seconds (default 60) says
# which are still running. Every lane runs to its end even when another failed; the exit code is
# 0 only when all passed, and the last lines list each lane's result and time.
#
# The lanes must not build the same tool (hack/toolchain.sh) at once: callers build what the
# lanes need before starting them (.ci/run, make e2e).
set -uo pipefail

if (($# == 0 || $# % 2 != 0)); then
  echo "usage: hack/lanes.sh NAME 'COMMAND' [NAME 'COMMAND' ...]" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${CAPX_LANE_LOGS:-$root/_artifacts/lanes}
tick=${CAPX_LANE_TICK:-60}
mkdir -p "$logs"
start=$SECONDS
bold=$'\033[1m' plain=$'\033[0m'

names=() pids=()
declare -A began
while (($#)); do
  name=$1 cmd=$2
  shift 2
  log=$logs/$name.log
  : >"$log"
  printf '%s[lanes] %s: started (log %s): %s%s\n' "$bold" "$name" "$log" "$cmd" "$plain"
  began[$name]=$SECONDS
  # Its own process group, so that an interrupted run stops the whole lane (see the trap).
  setsid -w bash -c "$cmd" >"$log" 2>&1 </dev/null &
  pids+=($!) names+=("$name")
done

stop() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  wait
  exit 130
}
trap stop INT TERM

declare -A rc took
left=${#pids[@]}
next_tick=$((SECONDS + tick))
while ((left > 0)); do
  for i in "${!pids[@]}"; do
    name=${names[$i]}
    [[ -n ${rc[$name]:-} ]] && continue
    kill -0 "${pids[$i]}" 2>/dev/null && continue
    wait "${pids[$i]}"
    rc[$name]=$?
    took[$name]=$((SECONDS - began[$name]))
    left=$((left - 1))
    result=passed
    ((rc[$name] != 0)) && result="FAILED (exit ${rc[$name]})"
    printf '\n%s[lanes] ===== %s %s in %ds; its log (%s) follows =====%s\n' "$bold" "$name" "$result" "${took[$name]}" "$logs/$name.log" "$plain"
    cat "$logs/$name.log"
    printf '%s[lanes] ===== end of %s (%s) =====%s\n' "$bold" "$name" "$result" "$plain"
  done
  if ((left > 0 && SECONDS >= next_tick)); then
    running=()
    for name in "${names[@]}"; do [[ -z ${rc[$name]:-} ]] && running+=("$name $((SECONDS - began[$name]))s"); done
    printf '[lanes] at %ds, running: %s\n' "$((SECONDS - start))" "$(IFS=,; echo "${running[*]}" | sed 's/,/, /g')"
    next_tick=$((SECONDS + tick))
  fi
  ((left > 0)) && sleep 1
done

failed=0
printf '\n%s[lanes] results (%ds in all):%s\n' "$bold" "$((SECONDS - start))" "$plain"
for name in "${names[@]}"; do
  if ((rc[$name] == 0)); then
    printf '  %-12s passed  %5ds\n' "$name" "${took[$name]}"
  else
    printf '  %-12s FAILED  %5ds (exit %d; log above and in %s)\n' "$name" "${took[$name]}" "${rc[$name]}" "$logs/$name.log"
    failed=1
  fi
done
exit "$failed"
