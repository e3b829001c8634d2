#!/bin/bash
# The sampling profiler's cost as a user pays it: `chronicle record` of a program with and without
# --sample / --sched, the CPU time of the whole process tree (the program, its sampler thread and
# the recorder), runs alternated, ROUNDS rounds (default 7). Then per sample and per context
# switch: the difference over the number of events, and the bytes of the trace. The same for the
# timer fallback (CHRONICLE_SAMPLE_METHOD=timer). The ping-pong
# (two threads handing a byte back and forth, pinned to one CPU) is a program that does nothing
# but switch: the worst case for --sched.
#   bench/sampling_overhead.sh BUILD_DIR [ROUNDS]
set -euo pipefail
build=${1:?usage: sampling_overhead.sh BUILD_DIR [ROUNDS]}
rounds=${2:-7}
cli=$build/chronicle
workload=$build/tests/profile_workload
cputime=$build/bench/cputime
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs one configuration once; prints "cpu_seconds samples switches sampler_bytes".
run() {
  local name=$1 mode=$2 rounds_of_work=$3
  shift 3
  rm -rf "$work/$name"
  CHRONICLE_SELF_STATS_INTERVAL=0 ${PIN:-} "$cputime" "$cli" record -q "$@" -o "$work/$name" -- "$workload" "$mode" \
    "$rounds_of_work" 2> "$work/$name.err"
  local cpu samples switches bytes
  cpu=$(sed -n 's/.*tree_total=\([0-9.]*\).*/\1/p' "$work/$name.err")
  samples=$("$cli" dump "$work/$name" 2>/dev/null | grep -c ' sample ' || true)
  switches=$("$cli" dump "$work/$name" 2>/dev/null | grep -c ' switch ' || true)
  bytes=$(du -sb "$work/$name" | cut -f1)
  echo "$cpu $samples $switches $bytes"
}

summarize() {  # NAME: median and spread of column 1, and the medians of the others
  sort -n "$work/$1.runs" | awk -v name="$1" '{ cpu[NR]=$1; s[NR]=$2; w[NR]=$3; b[NR]=$4 }
    END { m=int((NR+1)/2); printf "%-26s cpu %.3f s (min %.3f, max %.3f)  samples %d  switches %d  trace bytes %d\n",
          name, cpu[m], cpu[1], cpu[NR], s[m], w[m], b[m] }'
}

echo "# $rounds rounds, alternated; CPU = user + system of the whole tree (cputime)"
for ((i = 0; i < rounds; ++i)); do
  run plain cpu 400 >> "$work/plain.runs"
  run sample cpu 400 --sample >> "$work/sample.runs"
  run sample_sched cpu 400 --sample --sched >> "$work/sample_sched.runs"
  # The fallback where perf events are refused: per-thread CPU-time timers and SIGPROF.
  CHRONICLE_SAMPLE_METHOD=timer run sample_timer cpu 400 --sample >> "$work/sample_timer.runs"
  # On one CPU: otherwise how the two threads land on the CPUs moves the figure by 25%.
  PIN="taskset -c 0" run pingpong pingpong 100000 >> "$work/pingpong.runs"
  PIN="taskset -c 0" run pingpong_sched pingpong 100000 --sched >> "$work/pingpong_sched.runs"
done
for name in plain sample sample_sched sample_timer pingpong pingpong_sched; do summarize "$name"; done | tee "$work/summary"
awk '{ cpu[$1]=$3; samples[$1]=$10; switches[$1]=$12; bytes[$1]=$15 }
  END {
    printf "sampling at 999 Hz: %+.2f%% CPU; %.1f us per sample; %.0f trace bytes per sample\n",
      100 * (cpu["sample"] / cpu["plain"] - 1), 1e6 * (cpu["sample"] - cpu["plain"]) / samples["sample"],
      (bytes["sample"] - bytes["plain"]) / samples["sample"]
    printf "sampling with timers (CHRONICLE_SAMPLE_METHOD=timer): %+.2f%% CPU; %.1f us per sample; %.0f trace bytes per sample\n",
      100 * (cpu["sample_timer"] / cpu["plain"] - 1), 1e6 * (cpu["sample_timer"] - cpu["plain"]) / samples["sample_timer"],
      (bytes["sample_timer"] - bytes["plain"]) / samples["sample_timer"]
    printf "context switches: %+.2f%% CPU on a ping-pong; %.2f us per switch; %.1f trace bytes per switch\n",
      100 * (cpu["pingpong_sched"] / cpu["pingpong"] - 1),
      1e6 * (cpu["pingpong_sched"] - cpu["pingpong"]) / switches["pingpong_sched"],
      (bytes["pingpong_sched"] - bytes["pingpong"]) / switches["pingpong_sched"]
  }' "$work/summary"
