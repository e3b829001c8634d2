#!/usr/bin/env bash
# What each combinator and bridge costs traced over untraced (docs/performance.md, "Combinators
# and bridges"): each benchmark of tasks_bench in a process of its own, ROUNDS rounds (default 5)
# alternating them, then per item the median, least and most CPU ns, and what tracing adds as the
# median of the rounds' paired differences, beside one read of the clock.
#
#   BUILD=build-bench bench/combinators_rounds.sh
#   BEFORE=OLD/bench/tasks_bench bench/combinators_rounds.sh
#       also an older tasks_bench (the same source built on an older library), run right after
#       this one in each round; what changed from it: the median of the rounds' paired differences
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=${ROUNDS:-5}
BEFORE=${BEFORE:-}
B=$BUILD/bench
[[ -x $B/tasks_bench ]] || { echo "combinators_rounds: build tasks_bench in $BUILD first" >&2; exit 1; }
[[ -z $BEFORE || -x $BEFORE ]] || { echo "combinators_rounds: BEFORE=$BEFORE is not a program" >&2; exit 1; }
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
run() {  # binary, benchmark name, label prefix ("" or "before:")
  "$1" --benchmark_filter="^BM_$2(/process_time)?\$" 2>/dev/null | awk -v prefix="$3" '/^BM_/ { sub("/process_time", "", $1); print prefix $1, $4 }' >>"$RESULTS"
}
COMBINATORS="WhenAllOfTwo WhenAllOfVector WhenAnyOfTwo WithTimeout ScopeSpawnJoin ScheduleHop AwaitYield"
for round in $(seq "$ROUNDS"); do
  for combinator in $COMBINATORS; do
    for tracing in 0 1; do
      run "$B/tasks_bench" "${combinator}_Chronicle/tracing:$tracing" ""
      [[ -n $BEFORE ]] && run "$BEFORE" "${combinator}_Chronicle/tracing:$tracing" "before:"
    done
  done
  for name in Span ClockRead; do
    run "$B/tasks_bench" "$name" ""
    [[ -n $BEFORE ]] && run "$BEFORE" "$name" "before:"
  done
  echo "round $round done" >&2
done
COMBINATORS=$COMBINATORS python3 - "$RESULTS" <<'PY'
import os, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, cpu = line.split()
    runs.setdefault(name, []).append(float(cpu) / 1000)  # CPU ns per iteration of 1000 items
def figure(values):
    return f"{statistics.median(values):8.2f} ns ({min(values):.2f}-{max(values):.2f})"
def paired(a, b):
    pairs = [x - y for x, y in zip(runs[a], runs[b])]
    return f"{statistics.median(pairs):+8.2f} ns ({min(pairs):+.2f} to {max(pairs):+.2f})"
print("per item: median (least-most) over the rounds")
for name, values in runs.items():
    print(f"{name:<48} {figure(values)}")
print()
print("added by tracing: median of the rounds' differences (least-most)")
for prefix in ["", "before:"]:
    for combinator in os.environ["COMBINATORS"].split():
        traced = f"{prefix}BM_{combinator}_Chronicle/tracing:1"
        untraced = f"{prefix}BM_{combinator}_Chronicle/tracing:0"
        if traced in runs and untraced in runs:
            print(f"{prefix + combinator:<48} {paired(traced, untraced)}")
if "BM_ClockRead" in runs:
    print(f"{'one clock read':<48} {figure(runs['BM_ClockRead'])}")
before = [name for name in runs if name.startswith("before:")]
if before:
    print()
    print("this build - BEFORE: median of the rounds' paired differences (least-most)")
    for name in before:
        if name[len("before:"):] in runs:
            print(f"{name[len('before:'):]:<48} {paired(name[len('before:'):], name)}")
PY
