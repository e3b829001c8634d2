#!/bin/bash
# Generates the traces of docs/performance-viewer.md (10 M and 100 M events) with
# timeline_demo under `chronicle record`, measures `chronicle view` on each, and deletes them
# (the 100 M one takes about 870 MiB). Run from the repository root after a build.
#   bash viewer/perf/run.sh [build dir = build] [scratch dir = /tmp]
set -euo pipefail
build=${1:-build}
scratch=${2:-/tmp}
for size in 10m 100m; do
  case $size in
    10m) rounds=300000 buffer=64M ;;    # 4 threads x 300,000 rounds, a job every 10: ~10.0 M events
    100m) rounds=3005000 buffer=256M ;; # ~100.0 M events
  esac
  trace="$scratch/chronicle-viewer-perf-$size"
  rm -rf "$trace"
  "$build/chronicle" record -q --buffer-size $buffer -o "$trace" -- "$build/tests/timeline_demo" $rounds 4 10 0
  node viewer/perf/measure.mjs "$build/chronicle" "$trace"
  rm -rf "$trace"
  echo
done
