#!/usr/bin/env bash
# The live push's latency for a quiet thread (docs/distributed.md, beside the live push):
# bench/quiet_spans (one span every PERIOD ms, COUNT times, on a thread that does nothing else;
# and IDLE threads that wrote one span at their start and then wait) is recorded with --otlp-endpoint at each push interval of INTERVALS, into tests/otlp/receiver.js,
# which logs the time each request arrived. A span's latency is that time minus the span's end
# (its endTimeUnixNano: the trace's clock as the real time): how long after it ended a collector
# had it. Needs node and tests/otlp's packages (npm ci in tests/otlp, as the tests do).
#   BUILD=build bench/live_push_latency.sh     (INTERVALS="1 0.25", COUNT=50, PERIOD=100, IDLE=1)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
INTERVALS=${INTERVALS:-"1 0.25"}
COUNT=${COUNT:-50}
PERIOD=${PERIOD:-100}
IDLE=${IDLE:-1}
for needed in "$BUILD/chronicle" "$BUILD/bench/quiet_spans"; do
  [[ -x $needed ]] || { echo "live_push_latency: build $needed first (ninja -C $BUILD chronicle_cli quiet_spans)" >&2; exit 1; }
done
[[ -d $ROOT/tests/otlp/node_modules ]] || { echo "live_push_latency: run npm ci in $ROOT/tests/otlp first" >&2; exit 1; }
T=$(mktemp -d)
RECEIVER=
trap '[[ -n $RECEIVER ]] && kill "$RECEIVER" 2>/dev/null; rm -rf "$T"' EXIT
node "$ROOT/tests/otlp/receiver.js" --log "$T/log" --port-file "$T/port" &
RECEIVER=$!
for _ in $(seq 100); do [[ -s $T/port ]] && break; sleep 0.1; done
[[ -s $T/port ]] || { echo "live_push_latency: the receiver did not start" >&2; exit 1; }
PORT=$(cat "$T/port")
echo "quiet_spans: $COUNT spans, one every $PERIOD ms, and $IDLE idle thread(s); from a span's end to its arrival, ms"
for interval in $INTERVALS; do
  : >"$T/log"
  "$BUILD/chronicle" record -q --otlp-endpoint "http://127.0.0.1:$PORT" --otlp-interval "$interval" \
    -o "$T/trace-$interval" -- "$BUILD/bench/quiet_spans" "$COUNT" "$PERIOD" "$IDLE" >/dev/null 2>"$T/record.err" ||
    { cat "$T/record.err" >&2; exit 1; }
  python3 - "$T/log" "$interval" "$COUNT" <<'PY'
import json, statistics, sys
log, interval, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
arrived = {}  # span id -> latency of its first arrival
for line in open(log):
    request = json.loads(line)
    if request.get("status") != 200:
        continue
    for entry in request["spans"]:
        span = entry["span"]
        if span.get("name") == "tick" and span["spanId"] not in arrived:
            arrived[span["spanId"]] = request["time"] - int(span["endTimeUnixNano"]) / 1e6
values = sorted(arrived.values())
if not values:
    sys.exit(f"interval {interval} s: no span arrived")
p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
print(f"--otlp-interval {interval} s: {len(values)}/{count} spans; latency min {values[0]:.0f}, "
      f"median {statistics.median(values):.0f}, p90 {p90:.0f}, max {values[-1]:.0f}")
PY
done
