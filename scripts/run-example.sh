#!/bin/bash
# The first command of the README: installs what is needed, builds, records the bundled
# example (a traced Asio echo server and its load client) under `chronicle record`, and shows
# what it recorded: a summary, the task graph's start and the events' start; then it starts
# the web viewer on the trace and prints its address.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
echo "== building (a few minutes the first time)"
bash scripts/build.sh build -DCHRONICLE_BUILD_BENCH=OFF >build-example.log 2>&1 || { tail -40 build-example.log; exit 1; }
trace=traces/echo-$(date +%Y%m%d-%H%M%S)
mkdir -p traces
echo
echo "== chronicle record -o $trace -- build/examples/echo_example 8 200"
./build/chronicle record -o "$trace" -- ./build/examples/echo_example 8 200
echo
echo "== chronicle stats $trace"
./build/chronicle stats --top 10 "$trace"
echo
echo "== chronicle dump --tasks $trace | head -24"
./build/chronicle dump --tasks "$trace" | head -24 || true
echo
echo "== chronicle dump $trace | head -12"
./build/chronicle dump "$trace" | head -12 || true
echo
echo "Trace: $(pwd)/$trace (CTF 1.8; 'babeltrace2 $trace | head' reads it too)"
# The viewer keeps running after this script; stop it with: kill $(cat traces/viewer.pid)
[ -f traces/viewer.pid ] && kill "$(cat traces/viewer.pid)" 2>/dev/null || true
nohup ./build/chronicle view --port "${CHRONICLE_VIEW_PORT:-8080}" "$trace" >traces/viewer.log 2>&1 &
echo $! >traces/viewer.pid
for _ in $(seq 50); do grep -q "http://" traces/viewer.log && break; sleep 0.1; done
echo "Viewer: $(grep -o 'http://[^ ]*' traces/viewer.log || echo "did not start, see traces/viewer.log")  (stop it: kill \$(cat traces/viewer.pid))"
