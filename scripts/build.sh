#!/bin/bash
# Configures and builds into DIR (default build/) with any extra CMake arguments; TARGETS, when
# set, names the targets to build (all of them otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
# shellcheck disable=SC2086 # TARGETS is a list of names
ninja -C "$dir" -j"${JOBS:-2}" ${TARGETS:-}
