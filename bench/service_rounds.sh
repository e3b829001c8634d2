#!/usr/bin/env bash
# What leaving tracing on costs a service under load (issue 44's headline figure): the example
# service of the async issue (examples/quote_service.cpp: Asio, coroutines, when_all,
# with_timeout, a thread pool) answering REQUESTS requests from CLIENTS clients at once, untraced,
# traced in-process, under `record` and under `record --compress`, ROUNDS alternated rounds:
# requests/s and p50/p99 latency as its clients measure them, and the CPU of the whole process tree.
#
#   BUILD=build REQUESTS=8000 CLIENTS=64 ROUNDS=5 bench/service_rounds.sh
#   BEFORE=OLD_BUILD bench/service_rounds.sh       # an older build in the same rounds
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXAMPLE=quote_example ARGS="${REQUESTS:-8000} ${CLIENTS:-64}" exec "$HERE/echo_rounds.sh"
