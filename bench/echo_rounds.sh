#!/usr/bin/env bash
# What tracing costs a busy program (issue 44): a bundled example under load, by default the Asio
# echo example (`echo_example CONNECTIONS MESSAGES`, both cores busy), untraced, traced in-process
# (CHRONICLE_OUTPUT), under `chronicle record` and under `record --compress`, ROUNDS rounds
# (default 5) alternating the four. For each mode: wall time, CPU of the whole process tree (wait4,
# `record` included), context switches, min / median / max; then each traced mode's cost over the
# untraced run of its round (paired, min / median / max); then, for the traced modes, what the
# trace itself says the tracing cost (`chronicle stats --json`, tracing_cost) beside the added CPU
# measured: the monitor's estimate and its error. When the example prints its load ("...
# requests/s; latency p50 X ms, p99 Y ms", as quote_example does), those figures too.
#
#   BUILD=build-bench bench/echo_rounds.sh            # needs the example, chronicle and cputime there
#   ROUNDS=5 CONNECTIONS=8 MESSAGES=20000 bench/echo_rounds.sh
#   BEFORE=OLD_BUILD bench/echo_rounds.sh             # also an older build's example and
#                                                     # chronicle, in the same rounds ("before:" rows)
#   EXAMPLE=quote_example ARGS="8000 64" bench/echo_rounds.sh   # another example (service_rounds.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
BEFORE=${BEFORE:-}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-8}
MESSAGES=${MESSAGES:-20000}
EXAMPLE=${EXAMPLE:-echo_example}
read -r -a ARGS <<<"${ARGS:-$CONNECTIONS $MESSAGES}"
CPUTIME=${CPUTIME:-$BUILD/bench/cputime}  # bench/cputime.cpp
for build in "$BUILD" ${BEFORE:+"$BEFORE"}; do
  for needed in "$build/examples/$EXAMPLE" "$build/chronicle"; do
    [[ -x $needed ]] || { echo "echo_rounds: build $needed first (TARGETS='$EXAMPLE chronicle_cli bench/cputime')" >&2; exit 1; }
  done
done
[[ -x $CPUTIME ]] || { echo "echo_rounds: build $CPUTIME first" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results

# mode build label: one run; appends "label mode round wall cpu voluntary involuntary estimate_ms events lost
# requests_per_s p50_ms p99_ms" (the last three "-" when the example does not print its load)
run() {
  local mode=$1 build=$2 label=$3 trace=$WORK/trace out=$WORK/out
  local example=$build/examples/$EXAMPLE chronicle=$build/chronicle
  rm -rf "$trace"
  local times
  case $mode in
    untraced) times=$("$CPUTIME" "$example" "${ARGS[@]}" 2>&1 >"$out" | grep '^cputime:') ;;
    in-process) times=$(CHRONICLE_OUTPUT=$trace "$CPUTIME" "$example" "${ARGS[@]}" 2>&1 >"$out" | grep '^cputime:') ;;
    record) times=$("$CPUTIME" "$chronicle" record -o "$trace" -- "$example" "${ARGS[@]}" 2>&1 >"$out" |
      grep '^cputime:') ;;
    record-compress) times=$("$CPUTIME" "$chronicle" record --compress -o "$trace" -- "$example" "${ARGS[@]}" 2>&1 \
      >"$out" | grep '^cputime:') ;;
  esac
  local load
  load=$(sed -n 's/.* \([0-9.]*\) requests\/s; latency p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms$/\1 \2 \3/p' "$out")
  local estimate=- events=- lost=0
  if [[ $mode != untraced ]]; then
    local json
    json=$("$chronicle" stats --json "$trace" 2>/dev/null)
    estimate=$(python3 -c 'import json,sys; c=json.load(sys.stdin).get("tracing_cost"); print(c["cpu_ns"]/1e6 if c else "-")' <<<"$json")
    events=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])' <<<"$json")
    lost=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["discarded"])' <<<"$json")
  fi
  value() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$times"; }
  echo "$label $mode $round $(sed -n 's/^cputime: wall=\([0-9.]*\).*/\1/p' <<<"$times") $(value tree_total) \
$(value tree_voluntary_switches) $(value tree_involuntary_switches) $estimate $events $lost ${load:-- - -}" >>"$RESULTS"
}

for round in $(seq "$ROUNDS"); do
  for mode in untraced in-process record record-compress; do
    run "$mode" "$BUILD" now
    [[ -n $BEFORE ]] && run "$mode" "$BEFORE" before
  done
  echo "round $round done" >&2
done

python3 - "$RESULTS" "$EXAMPLE ${ARGS[*]}" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
print(f"{sys.argv[2]}: min / median / max over the rounds")
def spread(values, fmt="{:.3f}"):
    values = sorted(values)
    return " / ".join(fmt.format(v) for v in (values[0], statistics.median(values), values[-1]))
labels = sorted({r[0] for r in rows}, reverse=True)
modes = ["untraced", "in-process", "record", "record-compress"]
by = {}
for label, mode, rnd, wall, cpu, vol, invol, est, events, lost, rate, p50, p99 in rows:
    by.setdefault((label, mode), {})[int(rnd)] = dict(wall=float(wall), cpu=float(cpu), vol=int(vol),
        invol=int(invol), est=None if est == "-" else float(est), events=events, lost=lost,
        load=None if rate == "-" else (float(rate), float(p50), float(p99)))
print(f"{'':8} {'mode':16} {'wall s':>24} {'CPU s':>24} {'switches (vol.)':>26} {'invol.':>22}")
for label in labels:
    for mode in modes:
        runs = list(by.get((label, mode), {}).values())
        if not runs: continue
        print(f"{label:8} {mode:16} {spread([r['wall'] for r in runs]):>24} {spread([r['cpu'] for r in runs]):>24} "
              f"{spread([r['vol'] for r in runs], '{:.0f}'):>26} {spread([r['invol'] for r in runs], '{:.0f}'):>22}")
def traced_against_untraced():
    """Each traced mode's runs beside the untraced runs of the same label (paired by round)."""
    for label in labels:
        base = by.get((label, "untraced"), {})
        for mode in modes[1:]:
            runs = by.get((label, mode), {})
            if runs: yield label, mode, base, runs
print("\nover the untraced run of the same round (paired), % min / median / max; events and losses of the last round")
for label, mode, base, runs in traced_against_untraced():
    wall = [100 * (runs[k]["wall"] / base[k]["wall"] - 1) for k in runs if k in base]
    cpu = [100 * (runs[k]["cpu"] / base[k]["cpu"] - 1) for k in runs if k in base]
    last = runs[max(runs)]
    print(f"{label:8} {mode:16} wall {spread(wall, '{:+.1f}')}   CPU {spread(cpu, '{:+.1f}')}   "
          f"events {last['events']}, lost {last['lost']}")
print("\nthe trace's own estimate of the tracing's CPU (stats tracing_cost) against the added CPU measured (paired)")
for label, mode, base, runs in traced_against_untraced():
    pairs = [(runs[k]["est"], 1000 * (runs[k]["cpu"] - base[k]["cpu"])) for k in runs if k in base and runs[k]["est"] is not None]
    if not pairs: continue
    ratios = [measured / est for est, measured in pairs if est > 0]
    print(f"{label:8} {mode:16} estimate ms {spread([p[0] for p in pairs], '{:.0f}')}   measured ms "
          f"{spread([p[1] for p in pairs], '{:.0f}')}   measured / estimate {spread(ratios, '{:.2f}') if ratios else '-'}")
if any(r["load"] for runs in by.values() for r in runs.values()):
    print("\nthe example's load, as its clients measured it")
    print(f"{'':8} {'mode':16} {'requests/s':>26} {'p50 ms':>24} {'p99 ms':>26}")
    for label in labels:
        for mode in modes:
            runs = [r["load"] for r in by.get((label, mode), {}).values() if r["load"]]
            if not runs: continue
            print(f"{label:8} {mode:16} {spread([r[0] for r in runs], '{:.1f}'):>26} "
                  f"{spread([r[1] for r in runs]):>24} {spread([r[2] for r in runs]):>26}")
    print("\nover the untraced run of the same round (paired), % min / median / max")
    for label, mode, base, runs in traced_against_untraced():
        keys = [k for k in runs if k in base and runs[k]["load"] and base[k]["load"]]
        if not keys: continue
        change = lambda i: [100 * (runs[k]["load"][i] / base[k]["load"][i] - 1) for k in keys]
        print(f"{label:8} {mode:16} requests/s {spread(change(0), '{:+.1f}')}   p50 {spread(change(1), '{:+.1f}')}   "
              f"p99 {spread(change(2), '{:+.1f}')}")
PY
