#!/bin/bash
# Builds the compression experiment's tools (issue 17; not part of the CMake build) against the
# chronicle_format library of BUILD_DIR, into BUILD_DIR/bench/compression.
#   bench/compression/build.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: build.sh BUILD_DIR}" && pwd)
ninja -C "$build" chronicle_format >/dev/null
mkdir -p "$build/bench/compression"
for tool in delta_hist dequantize; do
  g++ -std=c++20 -O2 -g -Wall -Wextra -I"$repo/include" -I"$repo/src" "$here/$tool.cpp" \
    "$build/libchronicle_format.a" -lfmt -lzstd -o "$build/bench/compression/$tool"
done
