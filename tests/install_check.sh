#!/bin/bash
# Installs the build into a temporary prefix, then builds a program against it twice: with
# find_package(chronicle) and with pkg-config, and runs both with tracing on.
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/tests/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
ninja -C "$work/consumer" >/dev/null
CHRONICLE_OUTPUT="$work/trace1" CHRONICLE_SHM_DIR="$work" "$work/consumer/consumer"
flags=$(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs chronicle-exporter)
g++ "$source/tests/consumer/main.cpp" $flags -o "$work/consumer-pc"
CHRONICLE_OUTPUT="$work/trace2" CHRONICLE_SHM_DIR="$work" "$work/consumer-pc"
for trace in trace1 trace2; do
  # The consumer's events; the session's own counters (category chronicle) come on top.
  events=$("$work/prefix/bin/chronicle" dump "$work/$trace" --category consumer | wc -l)
  [ "$events" -eq 30 ] || { echo "FAIL: $trace has $events events, expected 30"; exit 1; }
done
echo "find_package and pkg-config consumers both traced 30 events"
