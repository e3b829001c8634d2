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
  babeltrace2 python3-bt2  # the reference CTF reader: tests check it reads our traces
  binutils            # nm/objdump: the compiled-out test compares machine code
  libcpp-httplib-dev  # cpp-httplib: the /metrics endpoint (chronicle metrics serve, MetricsExporter)
  prometheus          # a real Prometheus and promtool: tests scrape our endpoint and check rules
  chromium            # the viewer's end-to-end tests drive it headless (playwright-core, no browser download)
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
