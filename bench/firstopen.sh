#!/usr/bin/env bash
# A first open as a user has it (issue 45, item 8): the trace's kept index deleted, `chronicle view
# TRACE --port 0` started, and the time until its server answers the page's address, then until it
# says it kept the index; its peak RSS and CPU (user + sys) from /usr/bin/time when it is stopped.
# Run binaries in turn to compare them (docs/performance-log.md, "First indexing" entries).
#
#   bench/firstopen.sh build/chronicle TRACE [ROUNDS=3]
set -euo pipefail
binary=$1
trace=$2
rounds=${3:-3}
[ -x "$binary" ] || { echo "firstopen.sh: $binary is not an executable" >&2; exit 2; }
[ -d "$trace" ] || { echo "firstopen.sh: $trace is not a trace directory" >&2; exit 2; }
command -v curl >/dev/null || { echo "firstopen.sh: needs curl" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Waits (0.05 s steps, at most `limit` s) until `condition` holds; false when it never did.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}
serving() { url=$(grep -o 'http://[0-9.:]*' "$log" | head -1) && [ -n "$url" ] && curl -s -o /dev/null "$url/"; }
kept() { grep -q 'kept the index' "$log"; }
for round in $(seq 1 "$rounds"); do
  rm -rf "$trace/.chronicle-view-index"
  start=$(date +%s.%N)
  /usr/bin/time -v "$binary" view "$trace" --port 0 >"$log" 2>&1 &
  timer=$!
  wait_for 3600 serving || { echo "firstopen.sh: the viewer never served" >&2; cat "$log" >&2; exit 1; }
  served=$(date +%s.%N)
  wait_for 3600 kept || echo "firstopen.sh: the index was not kept" >&2
  kept_at=$(date +%s.%N)
  pkill -INT -P "$timer" || true
  wait "$timer" || true
  cpu=$(awk -F': ' '/User time|System time/ {sum += $2} END {printf "%.2f", sum}' "$log")
  peak=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$log")
  awk -v r="$round" -v a="$start" -v s="$served" -v k="$kept_at" -v c="$cpu" -v p="$peak" \
    'BEGIN { printf "round %d: serving %.2f s, index kept %.2f s, CPU %s s, peak RSS %s MiB\n", r, s - a, k - a, c, p }'
done
