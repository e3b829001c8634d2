#!/usr/bin/env bash
# chronicle, Tracy and Perfetto side by side: the same loop of SPANS spans on one thread
# (bench/side_by_side/), each tracer recording every span, measured from outside as a user pays
# for it: the wall time of the run and the CPU time of every process and thread involved (the
# program, its collector thread or process, Tracy's capture, Perfetto's service thread), beside
# the writing thread's own time in the loop. Rounds alternate the tracers (A B C A B C ...), at
# normal priority; the summary gives min / median / max per span over the rounds.
#
#   bench/side_by_side.sh                        # chronicle only (and the untraced loop)
#   TRACY_SRC=DIR CAPSTONE_SRC=DIR PPQSORT_SRC=DIR PERFETTO_SDK=DIR bench/side_by_side.sh
#
# The peers are built from their public sources, which this script does not fetch: give it
# directories that hold them, and it skips a tracer whose sources are absent, saying so.
#   TRACY_SRC     a Tracy checkout (public/TracyClient.cpp, server/, capture/, getopt/)
#   CAPSTONE_SRC  capstone's sources, version 6 ("next"), for tracy-capture; x86 is enough
#   PPQSORT_SRC   PPQSort's sources (include/ppqsort.h), for tracy-capture
#   PERFETTO_SDK  a directory with Perfetto's amalgamated SDK, perfetto.h and perfetto.cc
# Other settings: SPANS (default 10000000), ROUNDS (5), TRACERS (default "untraced chronicle
# chronicle-record chronicle-compress tracy perfetto"), SCRATCH (where the peers are built and the traces written,
# default /var/tmp/chronicle-side-by-side; the builds are kept for the next run, the traces
# deleted), BUILD (chronicle's Release build, default build-bench, as bench/run.sh).
#
# How the tracers are set up: chronicle with its defaults (4 MiB per thread), in-process
# (CHRONICLE_OUTPUT: the collector is a thread of the program), under `chronicle record`, and
# under `chronicle record --compress` (its bytes are the .ctfz files as written).
# Tracy: ZoneScopedN per span, the client built with TRACY_ENABLE TRACY_ONLY_LOCALHOST
# TRACY_NO_SAMPLING TRACY_NO_SYSTEM_TRACING (zones only: chronicle records no stacks or scheduler
# data here either), tracy-capture connected from the start and TRACY_NO_EXIT=1, so the run ends
# when the capture has every zone and has saved the file. Perfetto: TRACE_EVENT per span, the
# in-process backend, a 256 MiB buffer written into the trace file every 100 ms.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
SPANS=${SPANS:-10000000}
ROUNDS=${ROUNDS:-5}
TRACERS=${TRACERS:-untraced chronicle chronicle-record chronicle-compress tracy perfetto}
SCRATCH=${SCRATCH:-/var/tmp/chronicle-side-by-side}
TRACY_SRC=${TRACY_SRC:-}
CAPSTONE_SRC=${CAPSTONE_SRC:-}
PPQSORT_SRC=${PPQSORT_SRC:-}
PERFETTO_SDK=${PERFETTO_SDK:-}
CXX=${CXX:-c++}
LOOP_SOURCES=$ROOT/bench/side_by_side
TRACY_PORT=18086
mkdir -p "$SCRATCH/bin" "$SCRATCH/obj" || exit 1
RUNS=$(mktemp -d "$SCRATCH/runs.XXXXXX")
RESULTS=$RUNS/results.txt
trap 'rm -rf "$RUNS"' EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }
skip() {  # tracer, why
  echo "$1: not measured: $2"
  TRACERS=$(tr ' ' '\n' <<<"$TRACERS" | grep -vx "$1" | paste -sd ' ')
  echo "skipped $1 $2" >>"$RUNS/skipped.txt"
}

say "machine"
echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores"
echo "kernel: $(uname -r); compiler: $($CXX --version | head -1)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

say "build: chronicle (Release, $BUILD)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHRONICLE_BUILD_BENCH=ON \
  -DCMAKE_CXX_FLAGS="${EXTRA_CXXFLAGS--Wno-error=restrict}" -DCHRONICLE_BUILD_TESTS=OFF \
  -DCHRONICLE_BUILD_EXAMPLES=OFF >"$RUNS/cmake.log" 2>&1 || { cat "$RUNS/cmake.log"; exit 1; }
ninja -C "$BUILD" chronicle_cli side_by_side_chronicle cputime >"$RUNS/build.log" 2>&1 ||
  { cat "$RUNS/build.log"; exit 1; }
CHRONICLE=$BUILD/chronicle
CPUTIME=$BUILD/bench/cputime
SPANS_CHRONICLE=$BUILD/bench/side_by_side_chronicle
# The peers' loops are compiled as chronicle's bench programs are: -O3, no -march.
PEER_FLAGS=(-std=c++20 -O3 -DNDEBUG -I"$LOOP_SOURCES" -pthread)

build_tracy() {
  [[ -n $TRACY_SRC && -f $TRACY_SRC/public/TracyClient.cpp && -d $TRACY_SRC/capture/src ]] ||
    { skip tracy "TRACY_SRC does not name a Tracy checkout"; return; }
  [[ -n $CAPSTONE_SRC && -f $CAPSTONE_SRC/CMakeLists.txt ]] ||
    { skip tracy "CAPSTONE_SRC does not name capstone's sources (tracy-capture needs them)"; return; }
  [[ -n $PPQSORT_SRC && -f $PPQSORT_SRC/include/ppqsort.h ]] ||
    { skip tracy "PPQSORT_SRC does not name PPQSort's sources (tracy-capture needs them)"; return; }
  say "build: Tracy ($TRACY_SRC)"
  local bin=$SCRATCH/bin obj=$SCRATCH/obj/tracy
  mkdir -p "$obj"
  if [[ ! -x $bin/spans_tracy ]]; then
    "$CXX" "${PEER_FLAGS[@]}" -DTRACY_ENABLE -DTRACY_ONLY_LOCALHOST -DTRACY_NO_SAMPLING -DTRACY_NO_SYSTEM_TRACING \
      -I"$TRACY_SRC/public" "$LOOP_SOURCES/spans_tracy.cpp" "$TRACY_SRC/public/TracyClient.cpp" -ldl \
      -o "$bin/spans_tracy" || { skip tracy "its client did not build"; return; }
  fi
  if [[ ! -x $bin/tracy-capture ]]; then
    # capstone as Tracy's own build takes it (static), x86 only: what a capture of this loop uses.
    cmake -S "$CAPSTONE_SRC" -B "$obj/capstone" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCAPSTONE_ARCHITECTURE_DEFAULT=OFF -DCAPSTONE_X86_SUPPORT=ON -DCAPSTONE_BUILD_CSTOOL=OFF \
      -DCAPSTONE_BUILD_LEGACY_TESTS=OFF -DCAPSTONE_INSTALL=OFF >"$RUNS/capstone.log" 2>&1 &&
      ninja -C "$obj/capstone" capstone >>"$RUNS/capstone.log" 2>&1 ||
      { tail -20 "$RUNS/capstone.log"; skip tracy "capstone did not build"; return; }
    printf '#pragma once\nnamespace tracy { static inline const char* GitRef = "side-by-side"; }\n' >"$obj/GitRef.hpp"
    # As Tracy's capture/CMakeLists.txt builds it (-O3 -march=native, TRACY_NO_STATISTICS), with
    # Debian's libzstd.
    local sources=("$TRACY_SRC"/capture/src/{capture,CaptureOutput}.cpp
      "$TRACY_SRC"/server/Tracy{Broadcast,Memory,Mmap,Print,SysUtil,TaskDispatch,TextureCompression,ThreadCompress,Worker}.cpp
      "$TRACY_SRC"/public/common/{tracy_lz4,tracy_lz4hc,TracySocket,TracyStackFrames,TracySystem}.cpp)
    local objects=() source
    for source in "${sources[@]}"; do
      local object
      object="$obj/$(basename "$source" .cpp).o"
      "$CXX" -std=c++20 -O3 -march=native -DNDEBUG -DTRACY_NO_STATISTICS -I"$obj" -I"$TRACY_SRC/public/common" \
        -I"$TRACY_SRC/server" -I"$CAPSTONE_SRC/include/capstone" -I"$PPQSORT_SRC/include" -c "$source" -o "$object" ||
        { skip tracy "tracy-capture did not build ($source)"; return; }
      objects+=("$object")
    done
    cc -O2 -c "$TRACY_SRC/getopt/getopt.c" -o "$obj/getopt.o" || { skip tracy "getopt did not build"; return; }
    "$CXX" "${objects[@]}" "$obj/getopt.o" "$obj/capstone/libcapstone.a" -lzstd -pthread -o "$bin/tracy-capture" ||
      { skip tracy "tracy-capture did not link"; return; }
  fi
  echo "built $bin/spans_tracy and $bin/tracy-capture"
}

build_perfetto() {
  [[ -n $PERFETTO_SDK && -f $PERFETTO_SDK/perfetto.h && -f $PERFETTO_SDK/perfetto.cc ]] ||
    { skip perfetto "PERFETTO_SDK does not name a directory with perfetto.h and perfetto.cc"; return; }
  say "build: Perfetto ($PERFETTO_SDK)"
  local bin=$SCRATCH/bin obj=$SCRATCH/obj/perfetto
  mkdir -p "$obj"
  if [[ ! -f $obj/perfetto.o ]]; then
    "$CXX" -std=c++17 -O3 -DNDEBUG -pthread -I"$PERFETTO_SDK" -c "$PERFETTO_SDK/perfetto.cc" -o "$obj/perfetto.o" ||
      { skip perfetto "its SDK did not build"; return; }
  fi
  if [[ ! -x $bin/spans_perfetto ]]; then
    "$CXX" "${PEER_FLAGS[@]}" -I"$PERFETTO_SDK" "$LOOP_SOURCES/spans_perfetto.cpp" "$obj/perfetto.o" \
      -o "$bin/spans_perfetto" || { skip perfetto "its loop did not build"; return; }
  fi
  echo "built $bin/spans_perfetto"
}

grep -qw tracy <<<"$TRACERS" && build_tracy
grep -qw perfetto <<<"$TRACERS" && build_perfetto

# One run: appends "tracer round wall cpu loop bytes compressed events lost" to $RESULTS.
value() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2" | head -1; }
run_one() {  # tracer, round
  local tracer=$1 round=$2 out=$RUNS/$1.out err=$RUNS/$1.err trace=$RUNS/trace
  rm -rf "$trace"
  case $tracer in
    untraced) "$CPUTIME" "$SPANS_CHRONICLE" "$SPANS" --untraced >"$out" 2>"$err" ;;
    chronicle) CHRONICLE_OUTPUT=$trace "$CPUTIME" "$SPANS_CHRONICLE" "$SPANS" >"$out" 2>"$err" ;;
    chronicle-record) "$CPUTIME" "$CHRONICLE" record --quiet -o "$trace" -- "$SPANS_CHRONICLE" "$SPANS" >"$out" 2>"$err" ;;
    chronicle-compress)
      "$CPUTIME" "$CHRONICLE" record --quiet --compress -o "$trace" -- "$SPANS_CHRONICLE" "$SPANS" >"$out" 2>"$err" ;;
    tracy)
      "$CPUTIME" sh -c '"$1" -o "$2" -f -a 127.0.0.1 -p "$3" >"$4" 2>&1 & TRACY_NO_EXIT=1 TRACY_PORT=$3 "$5" "$6"; wait' \
        sh "$SCRATCH/bin/tracy-capture" "$trace.tracy" "$TRACY_PORT" "$RUNS/capture.log" "$SCRATCH/bin/spans_tracy" \
        "$SPANS" >"$out" 2>"$err" ;;
    perfetto) "$CPUTIME" "$SCRATCH/bin/spans_perfetto" "$SPANS" "$trace.pftrace" >"$out" 2>"$err" ;;
  esac
  local status=$? times loop bytes=0 compressed=0 events=0 lost=0
  times=$(grep '^cputime:' "$err")
  loop=$(value loop_seconds "$(grep '^side_by_side: tracer' "$out")")
  if [[ $status -ne 0 || -z $loop ]]; then
    echo "$tracer (round $round) failed (status $status):"
    cat "$out" "$err"
    return 1
  fi
  case $tracer in
    chronicle | chronicle-record | chronicle-compress)
      bytes=$(find "$trace" -type f -name 'thread-*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
      # Plain streams: what zstd -3 makes of them; --compress: the files as written.
      compressed=$bytes
      [[ $tracer != chronicle-compress ]] &&
        compressed=$(find "$trace" -type f -name 'thread-*' -exec cat {} + | zstd -3 -q -c | wc -c)
      read -r events lost < <("$CHRONICLE" stats --json "$trace" |
        python3 -c 'import json,sys; p=json.load(sys.stdin); print(p["events"], p["discarded"])') ;;
    tracy)
      bytes=$(stat -c %s "$trace.tracy")
      compressed=$bytes  # Tracy's file is compressed (LZ4) as it saves it
      events=$(sed -n 's/^Zones: //p' "$RUNS/capture.log" | tr -d ', ')
      events=$((2 * ${events:-0}))  # a zone is a begin and an end
      lost=$((2 * SPANS - events)) ;;
    perfetto)
      bytes=$(stat -c %s "$trace.pftrace")
      compressed=$(zstd -3 -q -c "$trace.pftrace" | wc -c)
      lost=$(value perfetto_chunks_lost "$(grep perfetto_chunks_lost "$out")")
      events=$((2 * SPANS)) ;;  # not counted: Perfetto's own loss figure (chunks) stands for it
  esac
  echo "$tracer $round $(value wall "$times") $(value tree_total "$times") $loop $bytes $compressed $events $lost" >>"$RESULTS"
  rm -rf "$trace" "$trace.tracy" "$trace.pftrace"
  printf '%s: wall %ss, CPU %ss, loop %ss\n' "$tracer" "$(value wall "$times")" "$(value tree_total "$times")" "$loop"
}

say "runs: $SPANS spans each, $ROUNDS rounds of: $TRACERS"
for round in $(seq "$ROUNDS"); do
  echo "-- round $round"
  for tracer in $TRACERS; do run_one "$tracer" "$round"; done
done

say "summary (ns per span; min / median / max over $ROUNDS rounds)"
python3 - "$RESULTS" "$SPANS" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
spans = int(sys.argv[2])
by_tracer = {}
for tracer, _round, wall, cpu, loop, raw, packed, events, lost in rows:
    by_tracer.setdefault(tracer, []).append(
        (float(wall), float(cpu), float(loop), int(raw), int(packed), int(events), int(lost)))
def spread(values):
    values = [v * 1e9 / spans for v in values]
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"
print("| tracer | wall per span | CPU per span, all processes | writer's loop per span | bytes per event, raw / compressed | events recorded, lost |")
print("| --- | --- | --- | --- | --- | --- |")
for tracer, runs in by_tracer.items():
    raw = statistics.median(r[3] for r in runs) / (2 * spans)
    packed = statistics.median(r[4] for r in runs) / (2 * spans)
    size = "" if tracer == "untraced" else f"{raw:.2f} / {packed:.3f}"
    if tracer in ("tracy", "chronicle-compress"):
        size = f"(not written) / {packed:.3f}"  # compressed as they are written
    events = "" if tracer == "untraced" else f"{min(r[5] for r in runs):,} (min), lost {max(r[6] for r in runs):,} (max)"
    if tracer == "perfetto":
        events = f"not counted; chunks lost {max(r[6] for r in runs):,} (max)"
    print(f"| {tracer} | {spread([r[0] for r in runs])} | {spread([r[1] for r in runs])} | "
          f"{spread([r[2] for r in runs])} | {size} | {events} |")
EOF
[[ -f $RUNS/skipped.txt ]] && cat "$RUNS/skipped.txt"
exit 0
