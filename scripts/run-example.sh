#!/bin/bash
# The first command of the README: installs what is needed, builds, records the bundled
# example under `chronicle record` and shows what it recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build >/dev/null
trace=traces/example-$(date +%Y%m%d-%H%M%S)
mkdir -p traces
echo "== chronicle record -o $trace -- build/examples/threads_example"
./build/chronicle record -o "$trace" -- ./build/examples/threads_example
echo
echo "== chronicle dump $trace | head -20"
./build/chronicle dump "$trace" | head -20
echo
echo "Trace written to $(pwd)/$trace (CTF 1.8: try 'babeltrace2 $trace | head')"
