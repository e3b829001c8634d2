#!/usr/bin/env bash
# What tracing adds to a co_spawn + co_await of an asio::awaitable (docs/performance.md, "Asio's
# own coroutines"): BM_AsioCoSpawn of tasks_bench (the handler-tracking define) and of
# tasks_bench_untracked (plain Asio), each benchmark in a process of its own, ROUNDS rounds
# (default 7) alternating them; then per item the median, least and most CPU ns, and the median of
# the rounds' paired differences, beside one read of the clock.
#
#   BUILD=build-bench bench/asio_coroutine_rounds.sh   # the build holding bench/tasks_bench (Release)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=${ROUNDS:-7}
B=$BUILD/bench
[[ -x $B/tasks_bench && -x $B/tasks_bench_untracked ]] ||
  { echo "asio_coroutine_rounds: build tasks_bench and tasks_bench_untracked in $BUILD first" >&2; exit 1; }
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
run() {  # binary, benchmark name
  "$1" --benchmark_filter="BM_$2\$" 2>/dev/null | awk '/^BM_/ { print $1, $4 }' >>"$RESULTS"
}
for round in $(seq "$ROUNDS"); do
  for name in 'AsioCoSpawn_Tracked/tracing:0/idle_thread:0' 'AsioCoSpawn_Tracked/tracing:0/idle_thread:1' \
    'AsioCoSpawn_Tracked/tracing:1/idle_thread:0' ClockRead; do
    run "$B/tasks_bench" "$name"
  done
  for name in 'AsioCoSpawn_Untracked/tracing:0/idle_thread:0' 'AsioCoSpawn_Untracked/tracing:0/idle_thread:1'; do
    run "$B/tasks_bench_untracked" "$name"
  done
  echo "round $round done" >&2
done
python3 - "$RESULTS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, cpu = line.split()
    runs.setdefault(name, []).append(float(cpu) / 1000)  # CPU ns per iteration of 1000 items
for name, values in runs.items():
    print(f"{name:<57} {statistics.median(values):7.2f} ns ({min(values):.2f}-{max(values):.2f})")
def differences(label, a, b):
    pairs = [x - y for x, y in zip(runs[a], runs[b])]
    print(f"{label:<57} {statistics.median(pairs):+7.2f} ns ({min(pairs):+.2f} to {max(pairs):+.2f})")
print()
print("per co_spawn + co_await: median of the rounds' differences (least-most)")
traced, off = "BM_AsioCoSpawn_Tracked/tracing:1/idle_thread:0", "BM_AsioCoSpawn_Tracked/tracing:0/idle_thread:0"
plain, plain_idle = "BM_AsioCoSpawn_Untracked/tracing:0/idle_thread:0", "BM_AsioCoSpawn_Untracked/tracing:0/idle_thread:1"
differences("traced, over untracked + idle thread", traced, plain_idle)
differences("traced, over untracked", traced, plain)
differences("traced, over the same build with no session + idle thread", traced,
            "BM_AsioCoSpawn_Tracked/tracing:0/idle_thread:1")
differences("tracked with no session, over untracked", off, plain)
read = statistics.median(runs["BM_ClockRead"])
print(f"{'six clock reads (the instants it records)':<57} {6 * read:+7.2f} ns (one read: {read:.2f})")
PY
