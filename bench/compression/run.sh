#!/bin/bash
# Reproduces the figures of RESULTS.md: records the span benchmark (span_storm) and a mixed trace
# (trace_generator), makes their dequantized copies (see RESULTS.md), and measures their delta
# entropy and whole-file zstd.
# Needs libzstd-dev, about 1.5 GB in /tmp and about 15 minutes on 2 cores; the traces are deleted.
#   bench/compression/run.sh BUILD_DIR OUT_DIR      (writes OUT_DIR/results-*.md)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR OUT_DIR}" && pwd)
out=${2:?usage: run.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
ninja -C "$build" span_storm trace_generator chronicle_cli >/dev/null
"$here/build.sh" "$build"
tools=$build/bench/compression

T=$(mktemp -d /tmp/compression-traces.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$build/chronicle" record -q -o "$T/storm" -- "$build/bench/span_storm" 1
CHRONICLE_OUTPUT="$T/gen" CHRONICLE_BUFFER_SIZE=64M "$build/bench/trace_generator" 10000000 4
rm -f "$T/gen/.chronicle-owner"
# The same traces with this VM's 21-tick TSC steps smoothed to 1 tick (see RESULTS.md).
"$tools/dequantize" "$T/storm" "$T/storm-dq"
"$tools/dequantize" "$T/gen" "$T/gen-dq"

: > "$out/results-entropy.md"
for t in storm gen storm-dq gen-dq; do
  "$tools/delta_hist" "$T/$t" >> "$out/results-entropy.md"
  # zstd -3 of the whole stream files, as the CLI does it.
  raw=0; z=0
  for f in "$T/$t"/thread-*; do
    raw=$((raw + $(stat -c %s "$f"))); z=$((z + $(nice zstd -3 -q -c "$f" | wc -c)))
  done
  echo "$t: zstd -3 of the whole files: $raw -> $z bytes" >> "$out/results-entropy.md"
done
# The per-option tables of RESULTS.md (results-storm.md and the rest) came from ctfz.cpp, the
# experiment's own copy of the compressor with every option switchable. It was deleted once
# src/compression/ctfz.cpp took one design; `git show 39ae383:bench/compression/ctfz.cpp` brings
# it back to reproduce them.
