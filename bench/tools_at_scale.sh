#!/usr/bin/env bash
# The tools on large generated traces: wall time, CPU time and peak RSS of `chronicle stats`,
# `chronicle dump`, `chronicle export` (Chrome JSON and OTLP/JSON, to /dev/null) and, beside them,
# `babeltrace2 -o dummy`, on plain and compressed traces of each size in EVENTS. The table of
# docs/performance-log.md "The tools at 100 M and 1 B events". Each trace is generated, measured and
# deleted before the next. Nothing passes or fails: it measures.
#
#   bench/tools_at_scale.sh                               # 10 M and 100 M events, 3 runs each
#   EVENTS=1000000000 RUNS=1 bench/tools_at_scale.sh      # 1 B: ~8.5 GB of trace in DIR
#   TOOLS="stats dump babeltrace2" bench/tools_at_scale.sh
#   KINDS=plain bench/tools_at_scale.sh                   # plain traces only ("plain zstd": both)
#   BUILD=build-bench DIR=/var/tmp THREADS=4 bench/tools_at_scale.sh
#
# The traces come from bench/trace_generator (THREADS threads of nested spans, counters and notes;
# CHRONICLE_COMPRESS=1 for the compressed ones). The commands alternate within a round (stats,
# dump, ... then again), each figure is min / median / max of RUNS, at normal priority. Peak RSS is
# the kernel's (GNU time's %M: the mapped trace's pages count). babeltrace2 reads plain traces only.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
EVENTS=${EVENTS:-10000000 100000000}
RUNS=${RUNS:-3}
DIR=${DIR:-/var/tmp}
THREADS=${THREADS:-4}
KINDS=${KINDS:-plain zstd}
TOOLS=${TOOLS:-stats dump chrome otlp babeltrace2}

for tool in chronicle bench/trace_generator; do
  if [[ ! -x $BUILD/$tool ]]; then
    echo "tools_at_scale: $BUILD/$tool is missing: build it first (bash scripts/build.sh $BUILD)" >&2
    exit 2
  fi
done
if [[ ! -x /usr/bin/time ]]; then
  echo "tools_at_scale: /usr/bin/time (GNU time, Debian package 'time') is needed for the peak RSS" >&2
  exit 2
fi
HAVE_BABELTRACE=1
command -v babeltrace2 >/dev/null || HAVE_BABELTRACE=0
TRACE=$DIR/tools-at-scale.$$
RESULTS=$(mktemp "${TMPDIR:-/tmp}/tools-at-scale.XXXXXX")
trap 'rm -f "$RESULTS"; rm -rf "$TRACE"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/ { print $2 }') GiB"
echo "kernel: $(uname -r); traces in $DIR on $(df -T "$DIR" | awk 'NR == 2 { print $2 }')"
echo "build: $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt")), commit $(git -C "$ROOT" rev-parse --short HEAD)"
[[ $HAVE_BABELTRACE == 1 ]] && echo "babeltrace2: $(babeltrace2 --version | head -1)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# Runs one tool on the trace, appends "events kind tool wall cpu rss_kb events_read" to RESULTS.
measure() {  # events kind tool events_read
  local events=$1 kind=$2 tool=$3 read=$4 command
  case $tool in
    stats) command=("$BUILD/chronicle" stats "$TRACE") ;;
    dump) command=("$BUILD/chronicle" dump "$TRACE") ;;
    chrome | otlp) command=("$BUILD/chronicle" export --format "$tool" --force -o /dev/null "$TRACE") ;;
    babeltrace2) command=(babeltrace2 -o dummy "$TRACE") ;;
  esac
  local times
  times=$(mktemp)
  if ! /usr/bin/time -f "%e %U %S %M" -o "$times" "${command[@]}" >/dev/null 2>"$times.err"; then
    echo "tools_at_scale: $tool failed on $events $kind: $(tail -2 "$times.err")" >&2
  else
    awk -v e="$events" -v k="$kind" -v t="$tool" -v r="$read" \
      'END { printf "%s %s %s %s %.2f %s %s\n", e, k, t, $1, $2 + $3, $4, r }' \
      "$times" >>"$RESULTS"
  fi
  rm -f "$times" "$times.err"
}

for events in $EVENTS; do
  for kind in $KINDS; do
    rm -rf "$TRACE"
    started=$(date +%s)
    if [[ $kind == zstd ]]; then
      CHRONICLE_COMPRESS=1 CHRONICLE_OUTPUT=$TRACE CHRONICLE_BUFFER_SIZE=64M \
        "$BUILD/bench/trace_generator" "$events" "$THREADS" >/dev/null 2>&1
    else
      CHRONICLE_OUTPUT=$TRACE CHRONICLE_BUFFER_SIZE=64M "$BUILD/bench/trace_generator" "$events" "$THREADS" \
        >/dev/null 2>&1
    fi
    counted=$("$BUILD/chronicle" stats "$TRACE" 2>/dev/null | sed -n '2s/^\([0-9,]*\) events in.*/\1/p' | tr -d ,)
    echo "$kind trace of $events events: $(du -sh "$TRACE" | cut -f1), ${counted:-?} events read," \
      "generated in $(($(date +%s) - started)) s"
    for ((run = 1; run <= RUNS; ++run)); do
      for tool in $TOOLS; do
        [[ $tool == babeltrace2 && ($kind != plain || $HAVE_BABELTRACE == 0) ]] && continue
        measure "$events" "$kind" "$tool" "${counted:-$events}"
      done
    done
    rm -rf "$TRACE"
  done
done

echo
echo "| events | trace | command | wall s (min / median / max) | CPU s (median) | events read/s (median wall) | peak RSS MiB (median) |"
echo "|---:|---|---|---|---:|---:|---:|"
sort -k1,1n -k2,2 -k3,3 -s "$RESULTS" | awk '
  function median(list, n,   sorted, i, j, t) {
    for (i = 1; i <= n; ++i) sorted[i] = list[i]
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (sorted[j] < sorted[i]) { t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t }
    return n % 2 ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2
  }
  function flush(   lo, hi, i, m) {
    if (n == 0) return
    lo = hi = wall[1]
    for (i = 2; i <= n; ++i) { if (wall[i] < lo) lo = wall[i]; if (wall[i] > hi) hi = wall[i] }
    m = median(wall, n)
    printf "| %s | %s | %s | %.2f / %.2f / %.2f | %.2f | %.1f M | %.0f |\n", ev, kind, tool, lo, m, hi, median(cpu, n), read / m / 1e6, median(rss, n) / 1024
    n = 0
  }
  { key = $1 " " $2 " " $3
    if (key != last) { flush(); last = key; ev = $1; kind = $2; tool = $3; read = $7 }
    ++n; wall[n] = $4; cpu[n] = $5; rss[n] = $6 }
  END { flush() }'
