#!/usr/bin/env bash
# The task layer's costs (docs/performance.md "The task layer's cost"): each benchmark of
# tasks_bench in a process of its own, ROUNDS rounds (default 5) alternating them, then the median,
# least and most CPU ns per item of each. A benchmark run after traced ones in one process pays for
# the heap and pages their sessions left, hence one process each.
#
#   BUILD=build-bench bench/tasks_rounds.sh      # the build holding bench/tasks_bench (Release)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=${ROUNDS:-5}
B=$BUILD/bench
[[ -x $B/tasks_bench && -x $B/tasks_bench_untracked ]] ||
  { echo "tasks_rounds: build tasks_bench and tasks_bench_untracked in $BUILD first" >&2; exit 1; }
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
for round in $(seq "$ROUNDS"); do
  for name in AwaitYield_Bare 'AwaitYield_Chronicle/tracing:0' 'AwaitYield_Chronicle/tracing:1' AwaitChildTask_Bare \
    'AwaitChildTask_Chronicle/tracing:0' 'AwaitChildTask_Chronicle/tracing:1' 'AsioPost_Tracked/tracing:0' \
    'AsioPost_Tracked/tracing:1'; do
    "$B/tasks_bench" --benchmark_filter="BM_$name\$" 2>/dev/null | awk '/^BM_/ { print $1, $4 }' >>"$RESULTS"
  done
  "$B/tasks_bench_untracked" --benchmark_filter='BM_AsioPost_Untracked/tracing:0$' 2>/dev/null |
    awk '/^BM_/ { print $1, $4 }' >>"$RESULTS"
  echo "round $round done" >&2
done
# CPU ns per iteration of 1000 items: per item, median (least-most).
python3 - "$RESULTS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, cpu = line.split()
    runs.setdefault(name, []).append(float(cpu) / 1000)
for name, values in runs.items():
    print(f"{name:<42} {statistics.median(values):7.2f} ns ({min(values):.2f}-{max(values):.2f})")
PY
