#!/bin/bash
# Installs what chronicle needs to build and test, from Debian 12 packages. Idempotent: does
# nothing when every package is already there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git   # toolchain
  libfmt-dev          # {fmt}: note formatting, tool output
  libcli11-dev        # CLI11: the chronicle command's subcommands and options
  nlohmann-json3-dev  # JSON: tests read babeltrace2's Python output
  libgtest-dev libgmock-dev  # GoogleTest: the tests
  libbenchmark-dev    # Google Benchmark: bench/
  libasio-dev         # standalone Asio: the traced echo-server example and handler tracking
  libboost-dev        # Boost.Asio's headers: the Boost handler tracking and its coroutines are tested too
  babeltrace2 python3-bt2  # the reference CTF reader: tests check it reads our traces
  binutils            # nm/objdump: the compiled-out test compares machine code
  libcpp-httplib-dev  # cpp-httplib: the /metrics endpoint (chronicle metrics serve, MetricsExporter)
  prometheus          # a real Prometheus and promtool: tests scrape our endpoint and check rules
  clang libclang-rt-14-dev  # libFuzzer and its sanitizers: the fuzz targets in fuzz/
  clang-format        # the test script checks that every C++ file is formatted
  libsqlite3-dev sqlite3  # SQLite: chronicle export --format sqlite; the sqlite3 shell for docs/export.md
  libdw-dev           # elfutils libdw/libdwfl: the symbolizer names sampled addresses from ELF files
  libzstd-dev zstd    # zstd: bench/compression (the compressed trace format of issue 17 builds on it)
  python3             # the export tests read Chrome JSON with Python's json module
  chromium            # the viewer's end-to-end tests drive it headless (playwright-core, no browser download)
  iproute2            # ip netns, veth: the two-hosts test runs a traced server and client in two namespaces
)
# The viewer's front end is built with npm (packages from viewer/package-lock.json); Debian's
# node and npm unless the machine has them from elsewhere.
command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "chronicle: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js and npm (Debian's, unless a node is already there): the export tests decode OTLP/JSON
# with the official OpenTelemetry protobuf definitions from the npm registry, pinned in
# tests/otlp/package-lock.json and installed here so that the tests themselves need no network.
if ! command -v npm >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
otlp_dir="$(dirname "$0")/../tests/otlp"
if [ ! -d "$otlp_dir/node_modules/@opentelemetry/otlp-transformer" ] ||
   [ "$otlp_dir/package-lock.json" -nt "$otlp_dir/node_modules/.package-lock.json" ]; then
  echo "chronicle: npm ci in tests/otlp"
  (cd "$otlp_dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
fi
# The OpenTelemetry Python SDK (PyPI, every package pinned in tests/otlp/requirements.txt), in a
# virtual environment in tests/otlp/python: it traces the peer test's second service
# (tests/otlp/py_service.py), a service chronicle did not trace.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
fi
python_dir="$otlp_dir/python"
if [ ! -x "$python_dir/bin/python3" ] || [ "$otlp_dir/requirements.txt" -nt "$python_dir/installed" ]; then
  echo "chronicle: pip install into tests/otlp/python"
  rm -rf "$python_dir"
  python3 -m venv "$python_dir"
  "$python_dir/bin/pip" install -q --disable-pip-version-check --no-input -r "$otlp_dir/requirements.txt"
  touch "$python_dir/installed"
fi
# speedscope's own Chrome trace importer, pinned in tests/speedscope/package-lock.json: the export
# tests import the Chrome JSON with it and fail on any warning (a mis-nested slice).
speedscope_dir="$(dirname "$0")/../tests/speedscope"
if [ ! -d "$speedscope_dir/node_modules/speedscope" ] ||
   [ "$speedscope_dir/package-lock.json" -nt "$speedscope_dir/node_modules/.package-lock.json" ]; then
  echo "chronicle: npm ci in tests/speedscope"
  (cd "$speedscope_dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
fi
