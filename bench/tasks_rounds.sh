#!/usr/bin/env bash
# The task layer's costs (docs/performance-log.md "The task layer's cost"): each benchmark of
# tasks_bench in a process of its own, ROUNDS rounds (default 5) alternating them, then the median,
# least and most CPU ns per item of each. A benchmark run after traced ones in one process pays for
# the heap and pages their sessions left, hence one process each.
#
#   BUILD=build-bench bench/tasks_rounds.sh      # the build holding bench/tasks_bench (Release)
#   RING_MIB=64 bench/tasks_rounds.sh            # traced runs with rings of 64 MiB (default: Config's, 4 MiB)
#   BEFORE=OLD/bench/tasks_bench bench/tasks_rounds.sh
#       also an older tasks_bench, run right after this one in each round on the same benchmarks
#       (those of its names that it has), and what changed from it: the median of the rounds'
#       paired differences ("Events of one instant written as one group")
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=${ROUNDS:-5}
BEFORE=${BEFORE:-}
B=$BUILD/bench
[[ -x $B/tasks_bench && -x $B/tasks_bench_untracked ]] ||
  { echo "tasks_rounds: build tasks_bench and tasks_bench_untracked in $BUILD first" >&2; exit 1; }
[[ -z $BEFORE || -x $BEFORE ]] || { echo "tasks_rounds: BEFORE=$BEFORE is not a program" >&2; exit 1; }
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
run() {  # binary, benchmark name, label prefix ("" or "before:")
  "$1" --benchmark_filter="BM_$2\$" 2>/dev/null | awk -v prefix="$3" '/^BM_/ { print prefix $1, $4 }' >>"$RESULTS"
}
for round in $(seq "$ROUNDS"); do
  for name in AwaitYield_Bare 'AwaitYield_Chronicle/tracing:0' 'AwaitYield_Chronicle/tracing:1' \
    'AwaitChildTask_Bare/idle_thread:0' 'AwaitChildTask_Bare/idle_thread:1' \
    'AwaitChildTask_Chronicle/tracing:0/idle_thread:0' 'AwaitChildTask_Chronicle/tracing:0/idle_thread:1' \
    'AwaitChildTask_Chronicle/tracing:1/idle_thread:0' 'AsioPost_Tracked/tracing:0/idle_thread:0' \
    'AsioPost_Tracked/tracing:0/idle_thread:1' 'AsioPost_Tracked/tracing:1/idle_thread:0' ClockRead; do
    run "$B/tasks_bench" "$name" ""
    [[ -n $BEFORE ]] && run "$BEFORE" "$name" "before:"
  done
  for name in 'AsioPost_Untracked/tracing:0/idle_thread:0' 'AsioPost_Untracked/tracing:0/idle_thread:1'; do
    run "$B/tasks_bench_untracked" "$name" ""
  done
  echo "round $round done" >&2
done
# CPU ns per iteration of 1000 items: per item, median (least-most). Then what tracing adds, as
# the median of each round's difference (the two runs of a round are seconds apart, so the
# machine's drift between rounds cancels out), against the baselines of one thread and against
# those with an idle thread (the thread census of a traced run: a session runs a control thread).
python3 - "$RESULTS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, cpu = line.split()
    runs.setdefault(name, []).append(float(cpu) / 1000)
for name, values in runs.items():
    print(f"{name:<57} {statistics.median(values):7.2f} ns ({min(values):.2f}-{max(values):.2f})")
def differences(label, a, b):
    if a in runs and b in runs:
        pairs = [x - y for x, y in zip(runs[a], runs[b])]
        print(f"{label:<57} {statistics.median(pairs):+7.2f} ns ({min(pairs):+.2f} to {max(pairs):+.2f})")
print()
print("added by tracing: median of the rounds' differences (least-most)")
for label, traced, base in [
    ("co_await (yield)", "BM_AwaitYield_Chronicle/tracing:1", "BM_AwaitYield_Bare"),
    ("child task, over bare", "BM_AwaitChildTask_Chronicle/tracing:1/idle_thread:0", "BM_AwaitChildTask_Bare/idle_thread:0"),
    ("child task, over bare + idle thread", "BM_AwaitChildTask_Chronicle/tracing:1/idle_thread:0",
     "BM_AwaitChildTask_Bare/idle_thread:1"),
    ("Asio handler, over untracked", "BM_AsioPost_Tracked/tracing:1/idle_thread:0",
     "BM_AsioPost_Untracked/tracing:0/idle_thread:0"),
    ("Asio handler, over untracked + idle thread", "BM_AsioPost_Tracked/tracing:1/idle_thread:0",
     "BM_AsioPost_Untracked/tracing:0/idle_thread:1"),
    ("Asio: what an idle thread adds, untracked", "BM_AsioPost_Untracked/tracing:0/idle_thread:1",
     "BM_AsioPost_Untracked/tracing:0/idle_thread:0"),
]:
    differences(label, traced, base)
if "BM_ClockRead" in runs:
    read = statistics.median(runs["BM_ClockRead"])
    print(f"{'three clock reads (the instants of a task or handler)':<57} {3 * read:+7.2f} ns (one read: {read:.2f})")
before = [name for name in runs if name.startswith("before:")]
if before:
    print()
    print("this build - BEFORE: median of the rounds' paired differences (least-most)")
    for name in before:
        differences(name[len("before:"):], name[len("before:"):], name)
PY
