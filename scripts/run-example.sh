#!/bin/bash
# The first command of the README: installs what is needed, builds, records a bundled example
# under `chronicle record`, and shows what it recorded; then it starts the web viewer on the trace
# and prints its address.
#
#   bash scripts/run-example.sh          the Asio echo server and its load client: a summary,
#                                        the task graph's start and the events' start
#   bash scripts/run-example.sh quote    the quote service (coroutines on a pool, when_all,
#                                        a failing backend, a timeout, a queue, metrics): a
#                                        summary, a timed-out request's tasks and critical path
set -euo pipefail
cd "$(dirname "$0")/.."
example=${1:-echo}
case "$example" in
  echo | quote) ;;
  *) echo "usage: bash scripts/run-example.sh [echo|quote]" >&2; exit 2 ;;
esac
bash scripts/install-deps.sh
echo "== building (a few minutes the first time)"
bash scripts/build.sh build -DCHRONICLE_BUILD_BENCH=OFF >build-example.log 2>&1 || { tail -40 build-example.log; exit 1; }
trace=traces/$example-$(date +%Y%m%d-%H%M%S)
mkdir -p traces

# Prints "== chronicle ARGS" and runs ./build/chronicle ARGS.
show() {
  echo
  echo "== chronicle $*"
  ./build/chronicle "$@" || true
}

if [ "$example" = echo ]; then
  show record -o "$trace" -- ./build/examples/echo_example 8 200
  show stats --top 10 "$trace"
  echo
  echo "== chronicle dump --tasks $trace | head -24"
  ./build/chronicle dump --tasks "$trace" | head -24 || true
  echo
  echo "== chronicle dump $trace | head -12"
  ./build/chronicle dump "$trace" | head -12 || true
else
  show record -o "$trace" -- ./build/examples/quote_example 40 4
  show stats --top 10 "$trace"
  show dump --tasks --name 'request 3' "$trace"
  show stats --critical-path 'request 3' "$trace"
fi
echo
echo "Trace: $(pwd)/$trace (CTF 1.8; 'babeltrace2 $trace | head' reads it too)"
# The viewer keeps running after this script; stop it with: kill $(cat traces/viewer.pid)
[ -f traces/viewer.pid ] && kill "$(cat traces/viewer.pid)" 2>/dev/null || true
nohup ./build/chronicle view --port "${CHRONICLE_VIEW_PORT:-8080}" "$trace" >traces/viewer.log 2>&1 &
echo $! >traces/viewer.pid
for _ in $(seq 50); do grep -q "http://" traces/viewer.log && break; sleep 0.1; done
echo "Viewer: $(grep -o 'http://[^ ]*' traces/viewer.log || echo "did not start, see traces/viewer.log")  (stop it: kill \$(cat traces/viewer.pid))"
