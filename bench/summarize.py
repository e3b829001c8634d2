#!/usr/bin/env python3
"""Prints the table of figures and the ratios to the targets from a bench/run.sh work directory:
chronicle.N.json, lttng_off.N.json, lttng_on.N.json (Google Benchmark JSON, one per round N) and
figures.env. Each figure is the median over the rounds, with the least and the most beside it."""
import glob
import json
import os
import statistics
import sys

work = sys.argv[1]


def load_env(path):
    values = {}
    if os.path.exists(path):
        for line in open(path):
            key, _, value = line.rstrip("\n").partition("=")
            values[key] = value
    return values


def load_runs(stem):
    """run name -> its runs, one per round ({"error": ...} for a run that failed)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(work, f"{stem}.*.json"))):
        for entry in json.load(open(path)).get("benchmarks", []):
            if entry.get("run_type") == "aggregate":
                continue
            run = entry.get("run_name", entry["name"])
            if entry.get("error_occurred"):
                entry = {"error": entry.get("error_message", "error")}
            runs.setdefault(run, []).append(entry)
    return {run: [e for e in entries if "error" not in e] or entries[:1] for run, entries in runs.items()}


env = load_env(os.path.join(work, "figures.env"))
chron = load_runs("chronicle")
lt_off = load_runs("lttng_off")
lt_on = load_runs("lttng_on")
rounds = max((len(entries) for entries in chron.values()), default=0)


def num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def per_round(runs, name):
    """(wall, CPU) ns per iteration of one thread, one pair per round. With N threads Google
    Benchmark divides the threads' mean wall time by the iterations of all threads, so the wall
    figure is scaled by N back to one thread's; CPU time is already each thread's own."""
    entries = runs.get(name)
    if not entries or "error" in entries[0]:
        return []
    return [(e["real_time"] * e.get("threads", 1), e["cpu_time"]) for e in entries]


def times(runs, name):
    """The medians over the rounds of (wall, CPU)."""
    pairs = per_round(runs, name)
    if not pairs:
        return None, None
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def counter(runs, name, key):
    entries = runs.get(name)
    values = [e[key] for e in entries or [] if key in e]
    return statistics.median(values) if values else None


def counter_values(runs, name, key):
    """The counter's value in each round."""
    return [e[key] for e in runs.get(name) or [] if key in e]


def fmt_ns(value):
    if value is None:
        return "n/a"
    return f"{value:.3f}" if value < 1 else f"{value:.1f}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt_ratio(value, digits=2):
    return "n/a" if value is None else f"{value:.{digits}f}"


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "MISSED")


rows = []


def fmt_spread(values):
    if not values:
        return "n/a"
    if len(values) == 1:
        return fmt_ns(values[0])
    return f"{fmt_ns(statistics.median(values))} ({fmt_ns(min(values))}-{fmt_ns(max(values))})"


def row(label, runs, name, note=""):
    real, cpu = times(runs, name)
    entries = runs.get(name)
    error = entries[0].get("error") if entries else ("not run" if not runs else "missing")
    if real is None:
        note = f"{note} ({error})".strip()
    pairs = per_round(runs, name)
    rows.append((label, fmt_spread([p[0] for p in pairs]), fmt_spread([p[1] for p in pairs]), note))
    return real, cpu


def trace_note(name):
    b = counter(chron, name, "B/event")
    lost = counter(chron, name, "lost%")
    if b is None:
        return ""
    # The trace also holds a few events of its own (the thread's name): never "negative" losses.
    return f"{b:.3f} B/event on disk, {max(lost, 0.0):.1f}% of events not in the trace"


empty = row("empty loop", chron, "bm_empty_loop")
tsc = row("one __rdtsc()", chron, "bm_rdtsc")
tsc2 = row("two __rdtsc() (a span's minimum)", chron, "bm_rdtsc_pair")
clock = row("clock_gettime(CLOCK_MONOTONIC)", chron, "bm_clock_gettime_monotonic")
s1_process_rounds = counter_values(chron, "bm_span_enabled/threads:1", "process CPU ns/span")
if s1_process_rounds:
    rows.append(("span recorded, stream, 1 thread: writer + collector", "", fmt_spread(s1_process_rounds),
                 "the process's CPU per span, every thread's (the headline)"))
s1 = row("span recorded, stream, 1 thread: the writer", chron, "bm_span_enabled/threads:1",
         trace_note("bm_span_enabled/threads:1"))
s2 = row("span recorded, stream, 2 threads", chron, "bm_span_enabled/threads:2", trace_note("bm_span_enabled/threads:2"))
f1 = row("span recorded, flight, 1 thread", chron, "bm_span_enabled_flight/threads:1",
         "writer alone: nothing dropped, oldest packets overwritten")
f2 = row("span recorded, flight, 2 threads", chron, "bm_span_enabled_flight/threads:2", "")
off = row("span runtime-disabled (no session)", chron, "bm_span_disabled")
out = row("span compiled out (CHRONICLE_DISABLE)", chron, "bm_span_compiled_out",
          "same instructions as the empty loop: " + env.get("compiled_out_identical", "?"))
decode_ns = counter(chron, "bm_collector_decode", "ns/event")  # seconds per event in the JSON
decode_ns = decode_ns * 1e9 if decode_ns is not None else None
rows.append(("collector: decode one event (count_events)", "", fmt_ns(decode_ns),
             "per event, on a 64 KiB packet of spans"))
if lt_off or lt_on:
    row("LTTng-UST: 1 event, tracepoint off", lt_off, "bm_lttng_event")
    lt_pair_off = row("LTTng-UST: 2 events, tracepoint off", lt_off, "bm_lttng_event_pair")
    lt1 = row("LTTng-UST: 1 event, recorded", lt_on, "bm_lttng_event")
    lt_b = ratio(num(env.get("lttng_bytes")), num(env.get("lttng_events")))
    lt_events = num(env.get("lttng_events"))
    lt_disc = num(env.get("lttng_discarded"))
    lt_lost = (f" ({100 * lt_disc / (lt_disc + lt_events):.1f}%)"
               if lt_events is not None and lt_disc is not None and lt_disc + lt_events > 0 else "")
    lt2 = row("LTTng-UST: 2 events (= a span), recorded", lt_on, "bm_lttng_event_pair",
              (f"{lt_b:.3f} B/event on disk, " if lt_b else "") +
              f"{env.get('lttng_events', '?')} events in the trace, {env.get('lttng_discarded', '?')} discarded{lt_lost}")
    row("two __rdtsc() in the LTTng binary (cross-check)", lt_off, "bm_rdtsc_pair")
else:
    lt2 = (None, None)
    lt_b = None

width = max(len(r[0]) for r in rows)
column = max(9, max(max(len(r[1]), len(r[2])) for r in rows))
print(f"{'measurement':<{width}}  {'wall ns':>{column}}  {'CPU ns':>{column}}  notes")
for label, real, cpu, note in rows:
    print(f"{label:<{width}}  {real:>{column}}  {cpu:>{column}}  {note}")
print(f"(ns per iteration of one thread: the median of {rounds} rounds, the least and the most in brackets.")
print(" With 2 threads both columns are per thread. CPU = the thread's own CPU time, which leaves out")
print(" time it waited for a core, except the writer + collector row: the whole process's. Ratios use")
print(" medians.)")

# ---- record -------------------------------------------------------------------------------
def storm_figures(prefix):
    f = {key: num(env.get(f"{prefix}_{key}")) for key in
         ("seconds", "spans", "recorded", "discarded", "record_cpu", "wall", "storm_cpu", "disk")}
    return f if f["seconds"] and f["spans"] is not None and f["recorded"] is not None else None


def storm_runs(prefix):
    runs = []
    i = 1
    while f"{prefix}_{i}_spans" in env:
        f = storm_figures(f"{prefix}_{i}")
        if f:
            runs.append(f)
        i += 1
    return runs


storm = storm_runs("storm")
storm16 = storm_runs("storm16")
print()
if storm or storm16:
    print("chronicle record, one thread emitting spans flat out (span_storm), one line per run:")
    print(f"  {'buffers':<8} {'emitted':>12} {'recorded':>12} {'discarded':>11} {'not in trace':>12}"
          f" {'record CPU':>10} {'per event':>9} {'storm on core':>13}")
    for label, runs in (("4 MiB", storm), ("16 MiB", storm16)):
        for f in runs:
            attempted = 2 * f["spans"]
            print(f"  {label:<8} {attempted / f['seconds'] / 1e6:7.1f} Mev/s {f['recorded'] / f['seconds'] / 1e6:7.1f} Mev/s"
                  f" {f['discarded']:>11.0f} {max(0.0, 100 * (attempted - f['recorded']) / attempted):11.2f}%"
                  f" {f['record_cpu'] / f['wall']:5.2f} core {1e9 * f['record_cpu'] / max(f['recorded'], 1):6.1f} ns"
                  f" {100 * f['storm_cpu'] / f['seconds']:12.0f}%")
    print("  (events emitted = 2 per span; 'not in trace' counts both events of a span whose begin was")
    print("   dropped; record CPU = the record process's own user+sys time over its wall time;")
    print(f"   {next(iter(storm or storm16))['disk'] / max(next(iter(storm or storm16))['recorded'], 1):.3f} B/event on disk)")

idle_cpu = num(env.get("idle_record_cpu"))
idle_wall = num(env.get("idle_wall"))
if idle_cpu is not None and idle_wall:
    print(f"idle (program sleeping {num(env.get('idle_seconds')):.1f} s with tracing on): record's own CPU"
          f" {idle_cpu:.2f} s = {100 * idle_cpu / idle_wall:.1f}% of a core")

# ---- targets ------------------------------------------------------------------------------
print()
print("targets (ratios from CPU times measured in this run):")
# The verdicts judge the writer + collector (the whole process's CPU per span: what a user pays);
# the writer alone is shown beside it, never judged by.
s1_process = statistics.median(s1_process_rounds) if s1_process_rounds else None
r_process = ratio(s1_process, tsc2[1])
r_flight = ratio(f1[1], tsc2[1])
r_stream = ratio(s1[1], tsc2[1])
print(f"  span <= 1.3 x two TSC reads: writer + collector {fmt_ratio(r_process)} x"
      f" (the writer alone: flight {fmt_ratio(r_flight)} x, stream {fmt_ratio(r_stream)} x)"
      f"  -> {verdict(None if r_process is None else r_process <= 1.3)}")
r_lt = ratio(lt2[1], s1_process)
r_lt_writer = ratio(lt2[1], f1[1])
print(f"  span >= 6x cheaper than two LTTng-UST events: writer + collector {fmt_ratio(r_lt, 1)} x"
      f" (the writer alone, flight: {fmt_ratio(r_lt_writer, 1)} x)  -> {verdict(None if r_lt is None else r_lt >= 6)}")
if env.get("lttng_status", "ok") != "ok":
    print(f"    LTTng: {env.get('lttng_status')}")
net = off[1] - empty[1] if off[1] is not None and empty[1] is not None else None
print(f"  runtime-disabled <= 1 ns: {fmt_ns(off[1])} ns ({fmt_ns(net)} ns over the empty loop)"
      f"  -> {verdict(None if off[1] is None else off[1] <= 1)}")
r_out = ratio(out[1], empty[1])
print(f"  compiled out = empty loop: {fmt_ratio(r_out)} x the empty loop's time, identical code:"
      f" {env.get('compiled_out_identical', '?')}  -> {verdict(None if r_out is None else env.get('compiled_out_identical') == 'yes')}")
b1 = counter(chron, "bm_span_enabled/threads:1", "B/event")
print(f"  <= 6 bytes per event on disk: {fmt_ratio(b1, 3)} (LTTng-UST: {fmt_ratio(lt_b, 3)})"
      f"  -> {verdict(None if b1 is None else b1 <= 6.0)}")
if b1 is not None:
    # Format 2: an 8-byte begin and an 8-byte end (the end names its span); each 64 KiB packet
    # adds an 88-byte header.
    print(f"    events {8.0:.3f} B + packet headers {b1 - 8.0:.3f} B (88 B per 64 KiB packet);"
          " format 2 traded the 6 B target for pairing by name (docs/performance-log.md, \"Format 2\")")
print("    (LTTng's figure is its writer alone: its consumer daemon is not counted)")
if storm:
    clean = sum(1 for f in storm if f["discarded"] == 0 and f["recorded"] >= 2 * f["spans"])
    extra = ""
    if storm16:
        clean16 = sum(1 for f in storm16 if f["discarded"] == 0 and f["recorded"] >= 2 * f["spans"])
        extra = f"; with 16 MiB buffers {clean16} of {len(storm16)}"
    print(f"  record keeps up with one thread, no drop: {clean} of {len(storm)} runs without a drop{extra}"
          f"  -> {verdict(clean == len(storm))}")
    loads = sorted(f["record_cpu"] / f["wall"] for f in storm + storm16)
    median = loads[len(loads) // 2]
    print(f"  record well under one core (< 0.5): median {median:.2f} core ({loads[0]:.2f}-{loads[-1]:.2f})"
          f"  -> {verdict(median < 0.5)}")
if idle_cpu is not None and idle_wall:
    print(f"  record sleeps when idle: {100 * idle_cpu / idle_wall:.1f}% of a core  -> {verdict(idle_cpu / idle_wall < 0.02)}")
print()
run_seconds = num(env.get("run_seconds")) or 0
print(f"other processes (not this script's children) used {env.get('others_cpu', '?')} s of CPU during the run"
      f" ({run_seconds:.0f} s x {env.get('cores', '?')} cores), lttng-sessiond and its consumer included;"
      f" wall-clock figures are clean only when that is small")
print(f"measured processes ran at: {env.get('priority', '?')}")
print(f"machine: {env.get('busy_start', '?')}% of the CPU busy with other work just before the run;"
      f" load average {env.get('load_start', '?')} at start, {env.get('load_end', '?')} at the end"
      f" ({env.get('cores', '?')} cores); page-cache write: {env.get('dd_write', '?')}")
