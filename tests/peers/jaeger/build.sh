#!/bin/bash
# Builds Jaeger v2 (the version go.mod here pins) from the Go module proxy into a cache directory
# that later runs reuse: prints the binary's path. Nothing is built when the binary is there.
# The first build takes 8 to 15 minutes on 2 cores; needs Go 1.26 (`go version`).
# With --path: prints where the binary is (or would be), builds nothing.
#
#   CHRONICLE_PEERS_DIR   the cache directory (default: /var/cache/chronicle-peers as root,
#                         else ~/.cache/chronicle-peers)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${CHRONICLE_PEERS_DIR:-}" ]; then
  if [ "$(id -u)" = 0 ]; then CHRONICLE_PEERS_DIR=/var/cache/chronicle-peers; else CHRONICLE_PEERS_DIR=$HOME/.cache/chronicle-peers; fi
fi
version=$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2 }' "$here/go.mod")
binary="$CHRONICLE_PEERS_DIR/jaeger-$version"
if [ "${1:-}" = --path ]; then
  echo "$binary"
  exit 0
fi
if [ ! -x "$binary" ]; then
  command -v go >/dev/null || { echo "build.sh: no Go toolchain (go) to build Jaeger with" >&2; exit 3; }
  mkdir -p "$CHRONICLE_PEERS_DIR"
  echo "chronicle: building Jaeger $version into $CHRONICLE_PEERS_DIR (once; 8 to 15 minutes on 2 cores)" >&2
  # A test peer, not a service: no inlining (-l) and no symbol tables (-s -w) cut the build's CPU
  # (7.8 minutes of wall time on 2 cores shared with a C++ build, 10 minutes of CPU).
  (cd "$here" && GOFLAGS=-mod=mod go build -trimpath -gcflags=all=-l -ldflags="-s -w" -o "$binary.partial" \
    github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$binary.partial" "$binary"
fi
echo "$binary"
