#!/usr/bin/env bash
# Two builds of tasks_bench side by side (docs/performance.md, "Events of one instant written as
# one group"): each traced benchmark, and the baselines, in a process of its own, ROUNDS rounds
# (default 9) with the two builds alternated within each round; then per benchmark the median,
# least and most CPU ns per item of each build, and the median of the rounds' paired differences.
#
#   bench/tasks_ab.sh BEFORE/tasks_bench AFTER/tasks_bench   # Release builds (build-bench)
set -uo pipefail
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: tasks_ab.sh BEFORE_TASKS_BENCH AFTER_TASKS_BENCH" >&2; exit 2; }
ROUNDS=${ROUNDS:-9}
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
for round in $(seq "$ROUNDS"); do
  for name in 'AwaitChildTask_Chronicle/tracing:1/idle_thread:0' 'AsioPost_Tracked/tracing:1/idle_thread:0' \
    'AwaitYield_Chronicle/tracing:1' 'AwaitChildTask_Bare/idle_thread:0' 'AwaitChildTask_Bare/idle_thread:1'; do
    for build in before after; do
      binary=$1
      [[ $build == after ]] && binary=$2
      "$binary" --benchmark_filter="BM_$name\$" 2>/dev/null | awk -v build=$build '/^BM_/ { print build, $1, $4 / 1000 }' >>"$RESULTS"
    done
  done
  echo "round $round done" >&2
done
python3 - "$RESULTS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    build, name, ns = line.split()
    runs.setdefault(name, {}).setdefault(build, []).append(float(ns))
for name, builds in runs.items():
    for build in ("before", "after"):
        values = builds.get(build, [])
        if values:
            print(f"{name:<55} {build:<6} {statistics.median(values):7.2f} ns ({min(values):.2f}-{max(values):.2f})")
    pairs = [a - b for a, b in zip(builds.get("after", []), builds.get("before", []))]
    if pairs:
        print(f"{name:<55} after - before, paired by round: {statistics.median(pairs):+.2f} ({min(pairs):+.2f}, {max(pairs):+.2f})")
PY
