#!/bin/bash
# The viewer benchmark of docs/performance-log.md ("Viewer performance"): for each size, generates a
# trace with timeline_demo under `chronicle record` (the same mix at every size; the run stops if
# the recorder discarded any event), measures `chronicle view` on it (measure.mjs: first open,
# reopen, windows, memory, the page in Chromium), exports it as Chrome JSON and opens that in
# speedscope (speedscope.mjs) for the sizes asked, and deletes the trace, its index and the JSON.
# Run from the repository root after a build, and `npm ci` in viewer/ and viewer/perf/.
#
#   bash viewer/perf/run.sh [BUILD=build] [SCRATCH=/tmp] [SIZE...=10m 100m] [options]
#     SIZE: 10m, 100m or 1b (10.0 M, 100.0 M, 1.0 G events; about 100 MiB, 1 GiB, 10 GiB on disk),
#           or 1m (1.0 M events: a size speedscope still opens)
#     --speedscope=10m,100m  the sizes to export and open in speedscope (default: 10m)
#     --speedscope-timeout=S how long speedscope may take to draw a profile (default 900 s)
#     --no-browser           no Chromium for our viewer's page (server-side figures only)
#     --keys                 also W/A/S/D key presses in Chromium
#     --cold                 also a third open with the trace's and index's pages dropped from the cache
#     --results=DIR          where the figures are kept (default: SCRATCH/chronicle-viewer-perf-results)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
positional=() speedscope=10m speedscope_timeout=900 measure_flags=() browser=--browser results=
for arg in "$@"; do
  case $arg in
    --speedscope=*) speedscope=${arg#--speedscope=} ;;
    --speedscope-timeout=*) speedscope_timeout=${arg#--speedscope-timeout=} ;;
    --no-browser) browser= ;;
    --keys) measure_flags+=(--keys) ;;
    --cold) measure_flags+=(--cold) ;;
    --results=*) results=${arg#--results=} ;;
    --*) echo "unknown option $arg" >&2; exit 2 ;;
    *) positional+=("$arg") ;;
  esac
done
build=${positional[0]:-build}
scratch=${positional[1]:-/tmp}
sizes=("${positional[@]:2}")
[ ${#sizes[@]} -gt 0 ] || sizes=(10m 100m)
[ -z "$browser" ] || measure_flags+=("$browser")
results=${results:-$scratch/chronicle-viewer-perf-results}
mkdir -p "$results"
chronicle=$(realpath "$build/chronicle")
demo=$(realpath "$build/tests/timeline_demo")

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

for size in "${sizes[@]}"; do
  # 4 threads, each round a span with two nested spans and a counter sample, every 10th round a
  # job task waiting on a part task (about 8.3 events per round and thread).
  pace=0
  case $size in
    1m) rounds=30000 buffer=64M ;;
    10m) rounds=300000 buffer=64M ;;
    100m) rounds=3005000 buffer=256M ;;
    # At 1 G events the demo is paced (below what this machine's disk takes, 324 MB/s by dd) so
    # that `record` keeps up and discards nothing; the mix is the same.
    1b) rounds=30050000 buffer=256M pace=500000 ;;
    *) echo "unknown size $size (1m, 10m, 100m, 1b)" >&2; exit 2 ;;
  esac
  trace="$scratch/chronicle-viewer-perf-$size"
  rm -rf "$trace" "$trace".*
  trap 'rm -rf "$trace" "$trace".*' EXIT
  echo "== $size: generating ($rounds rounds x 4 threads), load $(load)"
  begin=$(now)
  summary=$("$chronicle" record -q --buffer-size $buffer -o "$trace" -- "$demo" $rounds 4 10 0 $pace 2>&1 | grep 'trace in')
  echo "$summary"
  generate_seconds=$(since "$begin")
  discarded=$(sed -E 's/.* ([0-9,]+) discarded.*/\1/' <<<"$summary" | tr -d ,)
  if [ "$discarded" != 0 ]; then
    echo "the recorder discarded $discarded events: the trace is incomplete, its figures would lie (raise --buffer-size)" >&2
    exit 1
  fi
  trace_bytes=$(du -sb "$trace" | cut -f1)
  echo "generated in $generate_seconds s, $trace_bytes bytes"

  load_before=$(load)
  nice node "$here/measure.mjs" "$chronicle" "$trace" "${measure_flags[@]}" --json "$results/$size.view.json"
  load_after=$(load)

  export_seconds=null json_bytes=null
  if [[ ",$speedscope," == *",$size,"* ]]; then
    echo "== $size: exporting as Chrome JSON"
    begin=$(now)
    if nice "$chronicle" export --format chrome --force -o "$trace.json" "$trace"; then
      export_seconds=$(since "$begin")
      json_bytes=$(stat -c %s "$trace.json")
      nice node "$here/speedscope.mjs" "$trace.json" --timeout "$speedscope_timeout" --json "$results/$size.speedscope.json" ||
        echo "speedscope.mjs failed (status $?)"
    else
      echo "export failed (status $?)"
    fi
  fi
  disk_peak=$(shopt -s nullglob; du -sbc "$trace" "$trace".* | tail -1 | cut -f1)
  cat >"$results/$size.run.json" <<EOF
{"size": "$size", "rounds": $rounds, "buffer": "$buffer", "generateSeconds": $generate_seconds, "traceBytes": $trace_bytes,
 "discarded": $discarded, "exportSeconds": $export_seconds, "jsonBytes": $json_bytes, "diskBytes": $disk_peak,
 "loadBefore": "$load_before", "loadAfter": "$load_after", "finished": "$(date -u +%FT%TZ)"}
EOF
  rm -rf "$trace" "$trace".*
  echo
done
node "$here/report.mjs" "$results"
