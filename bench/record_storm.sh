#!/usr/bin/env bash
# One thread emitting spans as fast as it can under `chronicle record`, to ext4 and to tmpfs,
# plain and compressed: the table of docs/performance-log.md "record --compress and --rotate".
# The four configurations alternate (A B C D A B C D ...), RUNS rounds, at normal priority, and
# each figure is given as min / median / max. Nothing passes or fails: it measures.
#
#   bench/record_storm.sh                          # build/ (scripts/build.sh), 5 rounds of 2 s
#   RUNS=7 SECONDS_EACH=5 bench/record_storm.sh
#   BUILD=build-bench DISK=/var/tmp bench/record_storm.sh
#   CONFIGS="plain-ext4 zstd-ext4" bench/record_storm.sh   # a subset
#   RECORD_OPTIONS="--buffer-size 16M" bench/record_storm.sh
#
# DISK is a directory on a real disk (default /var/tmp; say which file system it is), SHM one on
# tmpfs (default /dev/shm). Per run: spans the storm made, events in the trace, events lost
# (discarded + unwritten, from the record summary), the recorder's own CPU time (bench/cputime:
# the collector, not the storm), the storm's CPU time, wall time, bytes on disk per event
# emitted. Traces are removed after each run.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
RUNS=${RUNS:-5}
SECONDS_EACH=${SECONDS_EACH:-2}
DISK=${DISK:-/var/tmp}
SHM=${SHM:-/dev/shm}
CONFIGS=${CONFIGS:-plain-ext4 zstd-ext4 plain-tmpfs zstd-tmpfs}
RECORD_OPTIONS=${RECORD_OPTIONS:-}

for tool in chronicle bench/span_storm bench/cputime; do
  if [[ ! -x $BUILD/$tool ]]; then
    echo "record_storm: $BUILD/$tool is missing: build it first (bash scripts/build.sh $BUILD)" >&2
    exit 2
  fi
done
RESULTS=$(mktemp "${TMPDIR:-/tmp}/record-storm.XXXXXX")
trap 'rm -f "$RESULTS"; rm -rf "$DISK/record-storm.$$" "$SHM/record-storm.$$"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "kernel: $(uname -r); disk: $DISK on $(df -T "$DISK" | awk 'NR == 2 { print $2 }'); shm: $SHM on $(df -T "$SHM" | awk 'NR == 2 { print $2 }')"
echo "build: $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt")), commit $(git -C "$ROOT" rev-parse --short HEAD)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

run_one() {  # config round
  local config=$1 round=$2 where options=$RECORD_OPTIONS
  case $config in
    *-ext4) where=$DISK/record-storm.$$ ;;
    *-tmpfs) where=$SHM/record-storm.$$ ;;
  esac
  [[ $config == zstd-* ]] && options="$options --compress"
  rm -rf "$where"
  local out err
  out=$(mktemp) err=$(mktemp)
  # shellcheck disable=SC2086  # $options is zero or more words
  "$BUILD/bench/cputime" "$BUILD/chronicle" record --quiet $options -o "$where" -- \
    "$BUILD/bench/span_storm" "$SECONDS_EACH" >"$out" 2>"$err"
  local storm summary cpu
  storm=$(grep '^span_storm:' "$out")
  summary=$(grep 'chronicle: trace in' "$err")
  cpu=$(grep '^cputime:' "$err")
  val() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2"; }
  local spans recorded discarded unwritten bytes
  spans=$(val spans "$storm")
  recorded=$(sed -n 's/.*: \([0-9,]*\) events,.*/\1/p' <<<"$summary" | tr -d ,)
  discarded=$(sed -n 's/.*, \([0-9,]*\) discarded.*/\1/p' <<<"$summary" | tr -d ,)
  unwritten=$(grep -o '[0-9,]* events unwritten' "$err" | head -1 | tr -d , | cut -d' ' -f1)
  bytes=$(find "$where" -type f -name 'thread-*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  if [[ -z $spans || -z $recorded ]]; then
    echo "record_storm: run $config #$round gave no figures:" >&2
    cat "$out" "$err" >&2
  else
    awk -v c="$config" -v spans="$spans" -v rec="$recorded" -v dis="${discarded:-0}" -v unw="${unwritten:-0}" \
      -v rcpu="$(awk -v u="$(val self_user "$cpu")" -v s="$(val self_sys "$cpu")" 'BEGIN { print u + s }')" \
      -v scpu="$(awk -v u="$(val cpu_user "$storm")" -v s="$(val cpu_sys "$storm")" 'BEGIN { print u + s }')" \
      -v wall="$(val seconds "$storm")" -v bytes="$bytes" \
      'BEGIN { emitted = 2 * spans; lost = dis + unw;
               printf "%s %.2f %.2f %.3f %.2f %.2f %.2f %.3f\n", c, emitted / 1e6, rec / 1e6,
                      100 * lost / emitted, rcpu, scpu, wall, bytes / emitted }' >>"$RESULTS"
    tail -1 "$RESULTS"
  fi
  rm -f "$out" "$err"
  rm -rf "$where"
}

echo "config emitted(M) recorded(M) lost(%) record_cpu(s) storm_cpu(s) storm_wall(s) bytes/event"
for round in $(seq "$RUNS"); do
  for config in $CONFIGS; do run_one "$config" "$round"; done
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "min / median / max of $RUNS rounds (record CPU per 100 M events emitted in the last column):"
python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    config, *values = line.split()
    rows.setdefault(config, []).append([float(v) for v in values])
names = ["emitted M", "recorded M", "lost %", "record CPU s", "storm CPU s", "wall s", "B/event"]
def spread(values):
    return f"{min(values):g} / {statistics.median(values):g} / {max(values):g}"
print("| config | " + " | ".join(names) + " | record CPU per 100 M events |")
print("|---|" + "---:|" * (len(names) + 1))
for config, runs in rows.items():
    columns = list(zip(*runs))
    per_100m = [r[3] / r[0] * 100 for r in runs if r[0] > 0]
    print(f"| {config} | " + " | ".join(spread(c) for c in columns) + f" | {spread([round(x, 3) for x in per_100m])} |")
EOF
