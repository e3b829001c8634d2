#!/usr/bin/env bash
# Builds the benchmarks (Release, in build-bench) and runs all of them, then prints the figures
# and their ratios to the targets. Nothing here passes or fails: it measures.
#
#   bench/run.sh                      # everything: ~3 min of measurements plus the build
#   ROUNDS=9 bench/run.sh             # more rounds (default 5; min / median / max shown)
#   STORM_SECONDS=5 bench/run.sh      # longer `chronicle record` throughput runs
#   SKIP_LTTNG=1 bench/run.sh         # without the LTTng-UST part
#   WAIT_QUIET=120 bench/run.sh       # first wait up to 120 s for the other processes to go idle
#   PRIORITY=-20 bench/run.sh         # raise the measured processes' priority (default: normal)
#   EXTRA_CXXFLAGS= bench/run.sh      # build without the -Wno-error=restrict work-around
#
# Steps: machine description; build; then ROUNDS rounds, each running the compared programs once
# in turn (A B A B ...): bench_chronicle (baselines, span recorded / disabled / compiled out,
# collector decode), bench_lttng without and within an LTTng session (starting lttng-sessiond if
# none runs, and stopping the one it started), span_storm under `chronicle record` with 4 and
# 16 MiB buffers; span_storm idle under record; a check that the compiled-out loop is the empty
# loop's code; a summary (bench/summarize.py). Temporary files go to $TMPDIR (default /tmp) and are
# removed. The side-by-side run with Tracy and Perfetto is bench/side_by_side.sh.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=${ROUNDS:-5}
STORM_SECONDS=${STORM_SECONDS:-2}
SKIP_LTTNG=${SKIP_LTTNG:-0}
WAIT_QUIET=${WAIT_QUIET:-0}
# Normal priority by default, as a user's program runs. On a shared machine PRIORITY=-20 (as root)
# runs each measured command in a session of its own (setsid: with sched_autogroup the scheduler
# shares the CPU between sessions, whatever the nice value of their processes) whose autogroup
# and processes are at that nice value; the summary says which was used.
PRIORITY=${PRIORITY:-0}
RUN=()
if [[ $(id -u) -eq 0 && $PRIORITY -ne 0 ]] && command -v setsid >/dev/null; then
  RUN=(setsid -w sh -c 'echo "$0" >/proc/self/autogroup 2>/dev/null; exec nice -n "$0" "$@"' "$PRIORITY")
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/chronicle-bench.XXXXXX")
FIGURES=$WORK/figures.env  # key=value lines for summarize.py
STARTED_SESSIOND=""
LTTNG_SESSION=""
T0=$(date +%s)

say() { printf '\n== %s\n' "$*"; }
figure() { printf '%s=%s\n' "$1" "$2" >>"$FIGURES"; }

sessiond_pidfile() {
  if [[ $(id -u) -eq 0 ]]; then echo /var/run/lttng/lttng-sessiond.pid; else echo "$HOME/.lttng/lttng-sessiond.pid"; fi
}
sessiond_running() {
  local pidfile pid
  pidfile=$(sessiond_pidfile)
  [[ -r $pidfile ]] && pid=$(cat "$pidfile") && [[ -n $pid ]] && alive "$pid" &&
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == lttng-sessiond ]]
}
# Alive and not a zombie waiting for its parent to reap it.
alive() { [[ -r /proc/$1/stat ]] && [[ $(sed -E 's/.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) != Z ]]; }
stop_sessiond() {
  [[ -z $STARTED_SESSIOND ]] && return
  kill "$STARTED_SESSIOND" 2>/dev/null
  for _ in $(seq 50); do alive "$STARTED_SESSIOND" || break; sleep 0.1; done
  if alive "$STARTED_SESSIOND"; then
    echo "lttng-sessiond $STARTED_SESSIOND still running after SIGTERM; sending SIGKILL"
    kill -9 "$STARTED_SESSIOND" 2>/dev/null
  else
    echo "stopped the lttng-sessiond this script started (pid $STARTED_SESSIOND)"
  fi
  STARTED_SESSIOND=""
}
cleanup() {
  if [[ -n $LTTNG_SESSION ]]; then lttng destroy "$LTTNG_SESSION" >/dev/null 2>&1; fi
  stop_sessiond
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Percentage of all cores busy over one second (everything but idle and iowait), from /proc/stat.
busy_percent() {
  local a b
  a=$(head -1 /proc/stat)
  sleep 1
  b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x); split(b, y); total = 0; idle = 0
    for (i = 2; i <= n; ++i) { d = y[i] - x[i]; total += d; if (i == 5 || i == 6) idle += d }
    printf "%.0f", total ? 100 * (total - idle) / total : 0 }'
}

# CPU time (s) all processes used since boot, and the CPU time this script and its children used:
# their difference over the run is what other work took from the benchmarks.
busy_seconds() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / { b = 0; for (i = 2; i <= NF; ++i) if (i != 5 && i != 6) b += $i; print b / hz }' /proc/stat; }
# (`times` must run in this shell, not in a $(...) subshell, which starts with zero times.)
own_seconds() {
  times >"$WORK/times.txt"
  OWN=$(awk '{ for (i = 1; i <= NF; ++i) { split($i, p, "m"); s += p[1] * 60 + p[2] } } END { print s }' "$WORK/times.txt")
}

# ---- machine ----------------------------------------------------------------------------------
say "machine"
MODEL=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
HYPERVISOR=$(lscpu | sed -n 's/^Hypervisor vendor:[[:space:]]*//p' | head -1)
echo "cpu: $MODEL, $(nproc) cores${HYPERVISOR:+ (guest of $HYPERVISOR)}"
echo "kernel: $(uname -r); clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
echo "compiler: $(c++ --version | head -1)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- src include 2>/dev/null || echo ' (src/include modified)')"
if [[ $WAIT_QUIET -gt 0 ]]; then
  for _ in $(seq "$WAIT_QUIET"); do [[ $(busy_percent) -le 5 ]] && break; done
fi
BUSY=$(busy_percent)
PRIORITY_NOTE="normal priority"
[[ ${#RUN[@]} -gt 0 ]] && PRIORITY_NOTE="own session and autogroup at nice $PRIORITY"
echo "measured processes run with: $PRIORITY_NOTE"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); CPU busy over the last second: $BUSY%"
echo "busiest processes:"; ps -eo pcpu,comm --sort=-pcpu | sed -n '2,4p'
figure cpu "$MODEL"
figure cores "$(nproc)"
figure kernel "$(uname -r)"
figure load_start "$(cut -d' ' -f1 /proc/loadavg)"
BUSY0=$(busy_seconds)
own_seconds
OWN0=$OWN
figure busy_start "$BUSY"
figure priority "$PRIORITY_NOTE"
# What the collectors' writes run into: page-cache write bandwidth of the temporary directory.
DD_OUT=$(dd if=/dev/zero of="$WORK/dd.bin" bs=64k count=4096 2>&1 | tail -1)
rm -f "$WORK/dd.bin"
echo "page-cache write, 256 MiB in 64 KiB writes to $WORK: ${DD_OUT##*, }"
figure dd_write "${DD_OUT##*, }"

# ---- build ------------------------------------------------------------------------------------
say "build ($BUILD, Release)"
# -Wno-error=restrict: GCC 12 at -O3 reports a false -Wrestrict inside std::string's operator+
# (GCC bug 105651) in src/analysis/profile.cpp, which -Werror turns into a failed Release build.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHRONICLE_BUILD_BENCH=ON \
  -DCMAKE_CXX_FLAGS="${EXTRA_CXXFLAGS--Wno-error=restrict}" \
  -DCHRONICLE_BUILD_TESTS=OFF -DCHRONICLE_BUILD_EXAMPLES=OFF -DCHRONICLE_DISABLE=OFF >"$WORK/cmake.log" 2>&1 ||
  { cat "$WORK/cmake.log"; exit 1; }
TARGETS="chronicle_cli bench_chronicle span_storm cputime"
grep -q '^build bench/bench_lttng:' "$BUILD/build.ninja" 2>/dev/null && TARGETS="$TARGETS bench_lttng"
BUILD_T0=$(date +%s)
# shellcheck disable=SC2086  # $TARGETS is a list of words
ninja -C "$BUILD" $TARGETS >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
BUILD_SECONDS=$(($(date +%s) - BUILD_T0))
echo "$(tail -1 "$WORK/build.log") (${BUILD_SECONDS} s)"
figure build_seconds "$BUILD_SECONDS"
B=$BUILD/bench
CHRONICLE=$BUILD/chronicle

GB_ARGS=(--benchmark_out_format=json)

# ---- chronicle --------------------------------------------------------------------------------
run_chronicle() {  # round
  say "bench_chronicle, round $1 (trace directories under $WORK)"
  CHRONICLE_BENCH_TMP=$WORK "${RUN[@]}" "$B/bench_chronicle" "${GB_ARGS[@]}" --benchmark_out="$WORK/chronicle.$1.json" 2>&1 |
    grep -v 'Library was built as DEBUG'
}

# The compiled-out span must leave exactly the empty loop's instructions.
disassemble() {
  objdump -d --no-show-raw-insn --disassemble="$2" "$1" |
    awk -v f="$2" '$0 ~ "<" f ">:$" { on = 1; next } on && /^$/ { exit } on' |
    sed -E 's/^ *[0-9a-f]+:[[:space:]]*//; s/[0-9a-f]+ <'"$2"'\+(0x[0-9a-f]+)>/<+\1>/; s/[[:space:]]+#.*$//'
}
disassemble "$B/bench_chronicle" bm_empty_loop >"$WORK/empty.s"
disassemble "$B/bench_chronicle" bm_span_compiled_out >"$WORK/compiled_out.s"
if [[ -s $WORK/empty.s ]] && cmp -s "$WORK/empty.s" "$WORK/compiled_out.s"; then
  echo "compiled out: bm_span_compiled_out is instruction for instruction bm_empty_loop ($(wc -l <"$WORK/empty.s") instructions)"
  figure compiled_out_identical yes
else
  echo "compiled out: bm_span_compiled_out differs from bm_empty_loop:"
  diff "$WORK/empty.s" "$WORK/compiled_out.s" | head -20
  figure compiled_out_identical no
fi

# ---- LTTng-UST --------------------------------------------------------------------------------
lttng_unavailable() {
  echo "LTTng-UST not measured: $*"
  figure lttng_status "$*"
}

LTTNG_READY=0
start_lttng() {
  say "LTTng-UST (bench_lttng)"
  [[ -x $B/bench_lttng ]] || { lttng_unavailable "bench_lttng was not built (pkg-config lttng-ust not found)"; return; }
  for tool in lttng lttng-sessiond babeltrace2; do
    command -v "$tool" >/dev/null || { lttng_unavailable "$tool is not installed"; return; }
  done
  if sessiond_running; then
    echo "using the lttng-sessiond already running (pid $(cat "$(sessiond_pidfile)")); it is left running"
  else
    if ! "${RUN[@]}" lttng-sessiond --daemonize >"$WORK/sessiond.log" 2>&1; then
      lttng_unavailable "lttng-sessiond --daemonize failed: $(tr '\n' ' ' <"$WORK/sessiond.log")"
      return
    fi
    for _ in $(seq 50); do sessiond_running && break; sleep 0.1; done
    sessiond_running || { lttng_unavailable "lttng-sessiond started but wrote no live pid to $(sessiond_pidfile)"; return; }
    STARTED_SESSIOND=$(cat "$(sessiond_pidfile)")
    echo "started lttng-sessiond (pid $STARTED_SESSIOND)"
  fi
  LTTNG_READY=1
}

run_lttng() {  # round
  [[ $LTTNG_READY == 1 ]] || return
  say "LTTng-UST, round $1"
  echo "-- no LTTng session: the tracepoint is off"
  "${RUN[@]}" "$B/bench_lttng" "${GB_ARGS[@]}" --benchmark_filter='lttng|rdtsc_pair' --benchmark_out="$WORK/lttng_off.$1.json" 2>&1 |
    grep -v 'Library was built as DEBUG'

  LTTNG_SESSION=chronicle-bench-$$
  local trace=$WORK/lttng-trace
  if ! lttng create "$LTTNG_SESSION" --output="$trace" >"$WORK/lttng.log" 2>&1 ||
     ! lttng enable-event --userspace chronicle_bench:span >>"$WORK/lttng.log" 2>&1 ||
     ! lttng start >>"$WORK/lttng.log" 2>&1; then
    lttng_unavailable "lttng session setup failed: $(tr '\n' ' ' <"$WORK/lttng.log")"
    LTTNG_READY=0
    return
  fi
  echo "-- in LTTng session $LTTNG_SESSION recording chronicle_bench:span (default UST channel) to $trace"
  "${RUN[@]}" "$B/bench_lttng" "${GB_ARGS[@]}" --benchmark_filter='lttng_event' --benchmark_out="$WORK/lttng_on.$1.json" 2>&1 |
    grep -v 'Library was built as DEBUG'
  lttng stop "$LTTNG_SESSION" >"$WORK/lttng_stop.log" 2>&1
  lttng list "$LTTNG_SESSION" >"$WORK/lttng_list.log" 2>&1
  lttng destroy "$LTTNG_SESSION" >>"$WORK/lttng_stop.log" 2>&1
  LTTNG_SESSION=""
  echo "channel: $(grep -E 'Buffering scheme|Event-loss mode|Sub-buffer (size|count)' "$WORK/lttng_list.log" |
    sed -E 's/^[[:space:]]+//' | paste -sd ';' | sed 's/;/; /g')"
  local discarded
  discarded=$(sed -n 's/.*Discarded events:[[:space:]]*\([0-9]*\).*/\1/p' "$WORK/lttng_list.log" | head -1)
  local bytes events
  bytes=$(find "$trace" -type f -path '*/ust/*' -name 'channel*' ! -path '*/index/*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  # sink.utils.counter counts what `babeltrace2 DIR | wc -l` counts, five times faster.
  events=$(babeltrace2 "$trace" --component=sink.utils.counter 2>"$WORK/bt.err" | awk '/Event messages/ { n = $1 } END { print n + 0 }')
  echo "LTTng trace: $bytes bytes in the ust stream files, $events events (babeltrace2), ${discarded:-0} discarded (lttng list)"
  figure lttng_status ok
  figure lttng_bytes "$bytes"
  figure lttng_events "$events"
  figure lttng_discarded "${discarded:-0}"
  rm -rf "$trace"
}
if [[ $SKIP_LTTNG == 1 ]]; then lttng_unavailable "skipped (SKIP_LTTNG=1)"; else start_lttng; fi

# ---- chronicle record -------------------------------------------------------------------------
record_run() {  # name, record's options (one word, may be empty), span_storm arguments...
  local name=$1 options=$2
  shift 2
  # shellcheck disable=SC2086  # $options is zero or more words
  "${RUN[@]}" "$B/cputime" "$CHRONICLE" record --quiet $options -o "$WORK/$name" -- "$B/span_storm" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err"
  echo "[$name]"
  cat "$WORK/$name.out" "$WORK/$name.err"
  local storm summary cpu
  storm=$(grep '^span_storm:' "$WORK/$name.out")
  summary=$(grep 'chronicle: trace in' "$WORK/$name.err")
  cpu=$(grep '^cputime:' "$WORK/$name.err")
  val() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2"; }
  figure "${name}_spans" "$(val spans "$storm")"
  figure "${name}_seconds" "$(val seconds "$storm")"
  figure "${name}_storm_cpu" "$(awk -v u="$(val cpu_user "$storm")" -v s="$(val cpu_sys "$storm")" 'BEGIN { print u + s }')"
  figure "${name}_recorded" "$(sed -n 's/.*: \([0-9,]*\) events,.*/\1/p' <<<"$summary" | tr -d ,)"
  figure "${name}_discarded" "$(sed -n 's/.*, \([0-9,]*\) discarded.*/\1/p' <<<"$summary" | tr -d ,)"
  figure "${name}_record_cpu" "$(awk -v u="$(val self_user "$cpu")" -v s="$(val self_sys "$cpu")" 'BEGIN { print u + s }')"
  figure "${name}_tree_cpu" "$(val tree_total "$cpu")"
  figure "${name}_wall" "$(val wall "$cpu")"
  figure "${name}_disk" "$(find "$WORK/$name" -type f -name 'thread-*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')"
  rm -rf "${WORK:?}/$name"
}
# ---- the rounds ---------------------------------------------------------------------------------
for round in $(seq "$ROUNDS"); do
  run_chronicle "$round"
  run_lttng "$round"
  say "chronicle record, round $round: span_storm for ${STORM_SECONDS}s, one thread, 4 MiB (default) then 16 MiB per thread"
  record_run "storm_$round" "" "$STORM_SECONDS"
  record_run "storm16_$round" "--buffer-size 16M" "$STORM_SECONDS"
done
stop_sessiond
say "chronicle record: span_storm --idle (tracing on, sleeping ${STORM_SECONDS}s)"
record_run idle "" --idle "$STORM_SECONDS"

# ---- summary ----------------------------------------------------------------------------------
figure load_end "$(cut -d' ' -f1 /proc/loadavg)"
own_seconds
figure others_cpu "$(awk -v b0="$BUSY0" -v b1="$(busy_seconds)" -v o0="$OWN0" -v o1="$OWN" 'BEGIN { x = (b1 - b0) - (o1 - o0); printf "%.1f", x < 0 ? 0 : x }')"
figure run_seconds "$(($(date +%s) - T0))"
say "summary"
python3 "$ROOT/bench/summarize.py" "$WORK" || echo "(python3 is needed for the summary; raw figures: $(cat "$FIGURES"))"
echo
echo "bench/run.sh took $(($(date +%s) - T0)) s, of which ${BUILD_SECONDS} s building"
