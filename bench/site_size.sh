#!/usr/bin/env bash
# What one trace point's site costs a program (issue 44): the bytes of text of a function holding
# only that site (nm -S, its .cold part apart) and the instructions one call executes with the
# session on (callgrind's inclusive count over bench/instructions_per_span's 20,000 calls of each,
# the first call's interning spread over them). Neither moves with the machine's load.
#
#   BUILD=build-bench bench/site_size.sh     # the build holding bench/instructions_per_span (Release)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
BIN=$BUILD/bench/instructions_per_span
[[ -x $BIN ]] || { echo "site_size: build instructions_per_span in $BUILD first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "site_size: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
OUT=$(mktemp)
COUNTS=$(mktemp)
trap 'rm -f "$OUT" "$COUNTS"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$OUT" "$BIN" >/dev/null 2>&1
# A function's line names the file of its first instruction: match the name alone.
callgrind_annotate --inclusive=yes "$OUT" >"$COUNTS" 2>/dev/null
SYMBOLS=$(nm -S "$BIN")
CALLS=20000
printf '%-14s %10s %10s %14s\n' SITE 'TEXT B' 'COLD B' 'INSTR/CALL'
for f in plain_span two_int_span string_span dynamic_span instant_point counter_point note_point four_points; do
  text=$(awk -v f="$f" '$4 == f { print $2 }' <<<"$SYMBOLS")
  cold=$(awk -v f="$f.cold" '$4 == f { print $2 }' <<<"$SYMBOLS")
  count=$(awk -v f=":$f " 'index($0, f) && !done { gsub(",", "", $1); print $1; done = 1 }' "$COUNTS")
  printf '%-14s %10d %10d %14.1f\n' "$f" "$((16#${text:-0}))" "$((16#${cold:-0}))" "$(echo "${count:-0} / $CALLS" | bc -l)"
done
