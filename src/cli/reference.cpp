// The reference part of every subcommand's --help, and so of docs/cli.md (scripts/cli-doc.sh
// writes it from the help). One file of prose, kept apart from the parsers in the other src/cli
// files: the text is long, and one place to read and edit it keeps its voice one.
#include "cli/reference.hpp"

#include <array>
#include <utility>

namespace chronicle::cli {
namespace {

// Plain text for a terminal, wrapped at 100 columns: no markup but `code`; docs are named by their
// path (docs/cli.md links them).
constexpr std::array kReference = std::to_array<std::pair<std::string_view, std::string_view>>({
    {"", R"ref(
`chronicle CMD --help` prints a subcommand's options and its reference; docs/cli.md is the same
text (scripts/cli-doc.sh writes it from this help). Bad input (a truncated, corrupted or foreign
trace or mapping) gets a message that names the file and the byte offset, and exit code 2.
)ref"},

    {"help", R"ref(
`chronicle help record` prints what `chronicle record --help` prints; `chronicle help metrics
serve` what `chronicle metrics serve --help` does; `chronicle help` alone what `chronicle --help`
does.
)ref"},

    {"record", R"ref(
record runs the program (and every process it starts, which inherits the environment), drains
their rings concurrently into DIR, shows a progress line on a terminal (events, bytes, drops) and
a summary at the end that says how the program ended. If it dies by a signal, SIGKILL included,
every event it committed is in the trace. DIR holds the first process's trace; each further
process gets a subdirectory `NAME-PID`. The exit code is the program's (128 + signal if it was
killed), or 1 when part of the trace could not be written at all (the summary says which process
and why). A closed stderr (`record ... 2>&1 | head -1`) loses only its messages: the trace is
finished, /dev/shm cleaned and the exit code the same; likewise for `record --trigger` (its
snapshots are still taken, its log still written) and `record --attach`.

Before the program runs, record refuses (the program never starts untraced; exit 1, or 2 where said) a
--buffer-size the recorder would refuse (it must hold two packets: 128 KiB with the default
64 KiB packets, the rule `chronicle::start()` applies, from one place), an output directory it
cannot create a file in (permissions, a read-only or full file system), and one that other users
may write to: a directory of another user, or writable by its group or by everyone, or inside a
group- or world-writable parent without the sticky bit (such a user could swap the trace's files
for links to files of yours; this refusal, and a link planted at the output's name, exit 2).
--allow-shared-output writes there anyway, never through a planted link. The trace directory is
made with mode 0700 and its files with 0600, like the shared mappings; every file is created new
(`O_EXCL`, never through a link: the metadata and definitions under a random temporary name,
renamed into place).

record is the child subreaper of what it runs: a process the program leaves behind
(`sh -c 'prog &'`, a daemon that forks and exits) is waited for and its trace collected; the
summary names the processes still running if a Ctrl-C or SIGTERM ends the wait (their traces stop
there). With a full output disk, packets that do not fit are left out and counted (`lost: N
packets (E events, B bytes) not written`, in the summary and the trace's metadata), the
definitions are written whenever they grow and 256 KiB is set aside for the last definitions and
metadata (a hidden `.reserve.*` file, gone at the end; a program killed while it writes its own
trace leaves it, and readers skip it), so what was written stays a readable trace; a file that
still cannot be written is named in the summary (`lost: cannot write ...`). --keep-shm leaves the
mappings in `/dev/shm/chronicle-record-PID/` (made new; `chronicle-record-PID-XXXXXX` when that
name is taken, never removing what was there) and the summary says where.

--sample --sched add a sampling profiler and scheduler data to the trace: a call stack every
1/999 s of each thread's CPU time (--sample=FREQ for another rate), and when each thread left and
regained a CPU, preempted or blocked (perf events, following every thread and child process; no
root needed where `perf_event_paranoid` is 2 or less). `stats --profile` and `stats --folded` read
them. Build with -fno-omit-frame-pointer (stacks are walked by frame pointers; the stats warn about
a module whose stacks stop after one frame) and keep the symbols (-g, not stripped). How it works,
and what it loses: docs/profiling.md.

--trigger (with --mode flight) watches the program's metrics and, each time a condition such as
'rpc.latency_seconds:p99 > 0.05' or 'errors rate > 10/s' becomes true (rates and quantiles over
the last second), snapshots its rings a moment later into `DIR.triggers/trigger-N`: the trace
around the moment an SLA was missed. Once per crossing, with hysteresis.
docs/control.md#triggers-a-snapshot-when-a-metric-crosses-a-line.

Long captures (docs/long-captures.md): --compress writes each stream in zstd-compressed units of
about 1 MiB after a transform into columns (`thread-N.ctfz`, `metadata.ctfz`: no file named
`metadata`, so babeltrace2 does not mistake it for plain CTF). --rotate 256M or --rotate 10min
cuts the trace into chunks `chunk-000001/`, ..., each a whole trace; --max-size 4G then removes
the oldest chunks, a flight recorder on disk. On a full disk the chunk being written goes on past
--rotate (a new one is tried again each second; the summary warns how often it was tried, apart
from the losses). dump, stats, export and view read a compressed or rotated trace as one, and say
when its oldest chunks were removed; `chronicle convert` writes it as one plain CTF trace.

--otlp-endpoint URL pushes the spans live to an OpenTelemetry collector over OTLP/HTTP, as
`export --otlp-endpoint` does, while the program runs (every --otlp-interval seconds, 1 by
default, the spans that have ended), and the rest at its exit: the same spans as an export of the
finished trace, each once. It works with --compress and --rotate too (a compressed stream's spans
go when its unit is written, within a second). A thread that wrote a few events and waits does not
hold the push back: its half-full packet is cut once its events have waited an interval, and once
they are written it holds nothing back (a span reaches the collector one to two intervals after it
ended, bench/live_push_latency.sh). With --max-size, chunks removed before a push came to them are
not pushed, and record says how many events that was (`the push read R of W events: --max-size
removed the other N before it read them`). docs/distributed.md#otlp-push.

--attach PID collects a running program's session instead (one started with CHRONICLE_ARMED=1,
or any running stream session with no collector) until it ends or Ctrl-C. docs/control.md.
)ref"},

    {"snapshot", R"ref(
snapshot writes what a process's rings hold now, without stopping or disturbing it; with a path
it reads the mapping a dead process left behind (in `/dev/shm/chronicle-PID-N.shm`, kept after a
crash of a program traced with CHRONICLE_OUTPUT). Given a pid, it (and top) looks for the
process's session in $CHRONICLE_SHM_DIR when set, in /dev/shm, and in the directories record gives
the programs it runs (`/dev/shm/chronicle-record-RECORDPID/`). The pid of `chronicle record` itself
(`$!` after `chronicle record ... &`) names the program it records, for snapshot, top and ctl; when
it records several, they are listed to pick from. Readers of a process by pid
(snapshot, top, metrics) accept only mappings owned by the user the process runs as (the caller's,
if it is not running) and say why they refuse another's; every mapping is checked field by field
before it is read, and a malformed one exits with 2 naming the field and its offset
(docs/guarantees.md, "What the tools do with a mapping they did not make"). Its -o follows record's
rule for output directories: refused (exit 2) when other users may write it, or when a link is
planted at its name, unless --allow-shared-output (a planted link is refused even then).
)ref"},

    {"dump", R"ref(
dump prints one event a line: wall-clock time (UTC), thread id and name, event type,
`category/name`, fields (a metric counter's increment and running total: `increment=1
total=17`). Discarded events are reported on standard error. --tasks prints the task graph
instead. Strings of the trace that are not UTF-8 are printed as they are.
)ref"},

    {"stats", R"ref(
stats is a trace in numbers: a flat profile of spans by name as gprof's (count, self time with
children excluded, wall time, running time, and the wall time's mean, p50, p90, p99, max; sorted by
self time), per thread busy (inside an outermost span of its own or a task run, as the viewer's
range stats count it) and idle (loop suspended) time, per task kind the count, failures and
lifetime and run-time distributions, counters (min, max, last, rate; one series per category and
name, whatever call sites and threads wrote it; a metric counter as its running total from the
trace's start, its rate never negative), events lost per thread, trace length, event rate and bytes
per event. A span's WALL time is from its begin to its end, suspension included; its RUNNING time
is the parts of that on threads: a span in a coroutine (chronicle::task) that suspends holds its
task's runs only, a thread's own span runs all along (docs/viewer.md, "A span's time"; the viewer's
flame graph shows either, range stats both, to the same nanosecond). --json for machines (spans'
total_ns is the wall time, running_ns the running time); a progress line on a terminal for large
traces. It reads the threads on all cores, and the stream of a thread that holds most of the trace
in pieces, one per core (the spans open across a piece's start are settled when the pieces are put
together); a trace with tasks is read in one time-ordered merge. Every JSON the tools write (stats
--json, the viewer's API and --html, the Chrome and OTLP exports) replaces bytes of a trace's
strings that are not UTF-8 (a thread name, a note, a label) with U+FFFD, one per invalid byte
sequence; dump prints them as they are. Percentiles come from log-scaled histograms (within about
4%) and busy time is counted as the events come, so the tool's own memory grows with the number of
names, threads and tasks (about 0.4 KB a task, with its waits), not with the number of events: 100
M events of spans, counters and notes take 1 MB of heap (it was 184 MB). The trace's files are
mapped: a trace under 256 MiB of stream files stays mapped while it is read (its pages count in the
resident size), a larger one has its pages let go behind the reader, 4 MiB at a time, so the
resident size stays near the heap's plus at most 4 MiB per stream being read (20 MiB while the
trace is opened and checked); a compressed stream adds one decoded unit (about 1 MiB) and needs no
temporary file. Figures: docs/performance-log.md#stats-memory-and-the-critical-path.

--critical-path TASK (an id such as t2.17, a label or a name): the chain of runs, waits and
resolutions that decided when the task finished, walked back through the task graph, with the time
each step contributed. From the moment the task finished: if another task resolved it, that task's
progress decided; else the task's last wait tells what held it up, and the awaited task's own path
is followed from its end; with no wait left, the task was there since its creation, and its
creator's path decided when that was. The steps add up to the chain's length. Each step's STATE
("state" in --json) is one word: ran (on CPU, in one of its runs), queued (resumed or resolved,
not yet running: before its first run after the awaited task finished, a message arrived, or its
creation), waiting (suspended: on a task, a message, its I/O or timer operation, or between runs
with no wait recorded), blocked (off CPU in a run: with --sched, each step's "off CPU while it
ran" line says how long). A task's own time is split by its runs; its resolution recorded just
after its last run counts to that run (docs/tasks.md, "The critical path"). When a label or name
fits several tasks, they are listed on standard error (id, lifetime, name) and the longest-lived
is taken; give its id to choose another. Time and memory are linear in the trace's tasks and the
path's steps (a task awaiting 1 M children in turn, 3 M steps before they were split by runs:
10.6 s and 964 MB).

For examples/coroutines.cpp (a request that loads a profile, then orders, which fail once and are
retried), `chronicle record -o t -- build/examples/coroutines_example` then
`chronicle stats --critical-path request t` prints:

  Critical path of t1.1 "request": 95.58 ms from 2026-11-28 18:22:24.897069849 to its resolution
              AT CONTRIBUTED  TASK                                     STATE   WHAT
    +       0 ns      2.0 us  t1.1 request                             queued  queued since creation
    +     2.0 us      3.6 us  t1.1 request                             ran     ran
    +     5.7 us      451 ns  t1.3 load profile                        queued  queued since creation
    +     6.1 us      991 ns  t1.3 load profile                        ran     ran
    +     7.1 us     3.08 ms  t1.4 thread_pool.schedule                queued  queued since creation
    +    3.09 ms      1.0 us  t1.3 load profile                        queued  queued after t1.4 finished
    +    3.09 ms    30.09 ms  t1.3 load profile                        ran     ran after t1.4 finished
    +   33.18 ms     2.10 ms  t1.1 request                             ran     ran after t1.3 finished
    +   35.28 ms      1.4 us  t2.1 load orders                         queued  queued since creation
    +   35.28 ms      471 ns  t2.1 load orders                         ran     ran
    +   35.28 ms      9.2 us  t2.2 thread_pool.schedule                queued  queued since creation
    +   35.29 ms      170 ns  t2.1 load orders                         queued  queued after t2.2 finished
    +   35.29 ms    10.19 ms  t2.1 load orders                         ran     ran after t2.2 finished
    +   45.47 ms      961 ns  t1.1 request                             queued  queued after t2.1 finished
    +   45.48 ms     10.9 us  t1.1 request                             ran     ran after t2.1 finished
    +   45.49 ms      571 ns  t2.3 load orders (retry)                 queued  queued since creation
    +   45.49 ms      170 ns  t2.3 load orders (retry)                 ran     ran
    +   45.49 ms      5.2 us  t2.4 thread_pool.schedule                queued  queued since creation
    +   45.49 ms      240 ns  t2.3 load orders (retry)                 queued  queued after t2.4 finished
    +   45.49 ms    50.09 ms  t2.3 load orders (retry)                 ran     ran after t2.4 finished
    +   95.58 ms      3.6 us  t1.1 request                             ran     ran after t2.3 finished

Each hop to the pool (`co_await pool.schedule()`) is a task thread_pool.schedule: its time is the
time in the pool's queue (the first, 3 ms, waited for the pool's threads to start).

--counters answers windows over counter history (average over the last 5 minutes, count since a
time, average between two points, rate per second) from prefix sums built in one pass, not by
rescanning. docs/metrics.md.

--profile (a trace recorded with --sample, and --sched) prints a flat profile and a call graph as
gprof does, the samples by thread, by the innermost span (--by-span) or by the running task
(--by-task: which coroutine burned the CPU), and the time each thread, span and task ran, waited
for a CPU or was blocked; --folded writes collapsed stacks for flamegraph.pl and speedscope.
docs/profiling.md.
)ref"},

    {"top", R"ref(
top is a live view of a running program, read from its mappings: its trace session's events/s,
bytes/s, discards and the tracing's CPU overhead (the trace points' estimated as events x the
per-event cost the library measured at start, plus the collector's measured; see docs/control.md,
"The overhead estimate"), per category with its state, and
its metrics with rates and quantiles. It needs either a trace session or metrics, works standalone
and under record, redraws in place on a terminal (`s` changes the order, `q` quits) and prints
tables to a pipe (--once, --iterations N). It finds a process's session as snapshot does.
docs/metrics.md.
)ref"},

    {"metrics", R"ref(
Metrics live in a per-process shared mapping (`/dev/shm/chronicle-metrics-PID.shm`) in per-thread
shards that readers sum, so these commands read them with no help from the program; labels make a
hierarchy that queries aggregate (sum, avg, max by any labels) and drill down. examples/prometheus/
has recording and alerting rules tested with `promtool test rules`. docs/metrics.md.
)ref"},

    {"metrics serve", R"ref(
Serves OpenMetrics/Prometheus text (tested by a real Prometheus scraping it); once the process has
exited it answers 503 with a line saying so, so Prometheus shows the target down rather than
frozen values. docs/metrics.md.
)ref"},

    {"export", R"ref(
export writes a trace (every process of a record run) as --format chrome (Chrome Trace Event JSON
for Perfetto UI and chrome://tracing: thread spans, tasks as async events, waits, resolutions and
creations as flow arrows, counters, thread and process names), otlp (OTLP/JSON
`ExportTraceServiceRequest`: spans for thread spans and tasks with trace, span and parent ids,
notes as span events, failed tasks with error status; checked against the official OpenTelemetry
protobuf definitions) or sqlite (tables processes, strings, threads, spans, tasks, task_runs,
edges, counters, notes). It writes as it reads, refuses to overwrite without --force, and leaves
no half-written file. Its memory grows with the trace's tasks and their runs (it reads the task
graph first), not with the events: a 100 M-event trace exports in 43 MB. Chrome JSON goes at about
7-8 M events/s, OTLP/JSON at 4-5 M, on one core
(docs/performance-log.md#the-exports-profiled-issue-17-seventh-part).

With --otlp-endpoint URL it pushes the same spans instead to an OpenTelemetry collector over
OTLP/HTTP (POST URL/v1/traces, --otlp-protocol http/protobuf (default) or http/json). The spans go
in batches (--otlp-batch-spans, 2048), retried with backoff on connection errors, 429, 502, 503
and 504. When the collector stays down they are spooled to disk (--otlp-spool, default
TRACE.otlp-spool), and --otlp-resend SPOOL sends them later. The end line gives the counts, and
the exit code is 1 when not everything was delivered. `record --otlp-endpoint` pushes live.
--otlp instead pushes to the collector OpenTelemetry's exporter environment names
(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, a URL used as it is, else OTEL_EXPORTER_OTLP_ENDPOINT plus
/v1/traces); with either, what the command line leaves out comes from _HEADERS (key=value,...),
_COMPRESSION (gzip, or --otlp-compression), _TIMEOUT (ms) and _PROTOCOL, the TRACES_ one first.
docs/distributed.md#otlp-push, with a Collector, Jaeger, Tempo and Prometheus setup.

The schema, the Chrome and OTLP mappings, and queries on the echo example's database (where the
handlers' time goes, failed tasks with their error and creator, each counter's maximum per minute,
a span self-time query) with their real output: docs/export.md.
)ref"},

    {"view", R"ref(
view starts a local web viewer of a trace (127.0.0.1, a free port unless --port N) and prints its
address; the page is TypeScript built with the project and served from the binary, so it works
offline. Lanes per thread with the task runs and the spans stacked by depth, the tasks by time
(packed rows, each reused once its task has ended, so any window shows the tasks alive in it) or as
a tree (a row per task right after its creator; subtrees collapse), each a line from creation to
resolution, thick where it ran, coloured by outcome, with arrows for created-by, waits and resolutions (a
click follows one), counters as charts, idle time shaded, when each thread was off its CPU
(blocked or waiting for one, record --sched) along its lane's foot and its stack samples as ticks
(record --sample), the tracks in groups per process that collapse and move; drag to pan, wheel to
zoom, W/A/S/D as in Perfetto and Tracy; click for details (with the task's critical path), search,
shift+drag for a range's stats and flame graph (spans merged by call path, or split by thread, or
the samples' call stacks; wall or running time; zoom on click), tooltips on hover, and the
window, selection and collapsed groups and subtrees in the URL, to share a view as a link.

The server does the level of detail (what is visible in a window at a given width, from an index
built once and kept beside the trace in `DIR/.chronicle-view-index` (in ~/.cache/chronicle when
DIR is another user's or others may write it: docs/viewer.md), which later views map instead of
reading the trace again; --no-cache skips it), so the browser never holds the whole trace, nor
the server the whole index: a 10 M-event trace is indexed in a few seconds the first time, reopens
in well under a second, and answers a pan or zoom in under 100 ms; a 1 G-event trace (10 GiB) opens
on a 24 GiB machine (its index's arrays held in files on disk while it is built, when the trace is
too large for the memory left), in 8.6 to 9.2 minutes the first time and 0.05 s after; a task's
details and critical path answer in ms even there. Those files are unnamed, in DIR (in $TMPDIR with
--no-cache), and gone when indexing ends; CHRONICLE_VIEW_SPILL=always|never overrides the choice,
and view warns before it starts when even that may not fit in the memory left, and leaves the
tasks' notes out (CHRONICLE_VIEW_NOTES=keep|drop decides instead). --html out.html writes one
self-contained file for small traces (the viewer and at most 8 bytes per byte of trace; task
details and critical paths are worked out in the page). More, and a screenshot (docs/viewer.png):
docs/viewer.md.
)ref"},

    {"merge", R"ref(
merge makes one trace of several (processes, hosts, record runs): OUT gets a trace per input trace
(`OUT/HOST-PID-PROCESS/`, stream files copied byte for byte; a compressed or rotated input's
packets decoded and joined, as convert writes them), each host's clock aligned on the first input's
host: by the wall-clock references, refined by send/receive pairs (offset, drift and an error bound
per host, convex-hull method, composed over a spanning tree). It prints per host what it used and
how many pairs supported it, or that it fell back to the wall clock. Every tool and babeltrace2
read OUT as a record run's directory; stats on it ends with a line per origin. An input may also be
an OTLP/JSON file of spans (from services instrumented with OpenTelemetry in other languages, e.g.
written by the Collector's file exporter): each of its resources becomes a trace of its own, its
SERVER and CLIENT spans receives and sends that pair with chronicle's. How it works:
docs/distributed.md#merging-traces.
)ref"},

    {"convert", R"ref(
convert writes one plain CTF directory from a compressed (record --compress) or rotated
(record --rotate) trace, the packets byte for byte as recorded, for babeltrace2.
docs/long-captures.md.
)ref"},

    {"recover", R"ref(
recover finishes a trace whose program died (SIGKILL, the OOM killer) while its own collector
(CHRONICLE_OUTPUT) wrote it. Such a trace names the mapping it was collected from, and every tool
that reads it says it was cut and how to recover it. `recover DIR` appends what the program's
mapping still holds (every event the program committed), plain or compressed, then removes the
mapping. `--list`
lists the mappings that dead processes of your user left in /dev/shm (and $CHRONICLE_SHM_DIR, or
the directory --in names); `--clean` removes them. docs/long-captures.md.
)ref"},

    {"ctl", R"ref(
ctl switches a running program's categories with no restart and no daemon: `enable 'net.*'`,
`disable db`, `level net 3` (verbose trace points up to level 3), `status` lists the categories
the program has met and their states. The program's own control thread applies the change,
records it as a note (`ctl: 'net.*' on (net.tcp, net.udp)`, category `chronicle`) and answers; ctl
returns once the change is in effect, or exits 1 when the program does not answer within 5 s. A
pattern also decides the state of categories that appear later. ctl changes only its own user's
programs (it refuses a process of another user, root's included, and a mapping others may write),
and a malformed mapping is exit 2, never written. `CHRONICLE_ARMED=1 PROGRAM` starts with every
category off, costing a trace point three loads until ctl enables some; `chronicle record --attach
PID` collects such a program (or any running stream session with no collector) until it ends or
Ctrl-C. How it works: docs/control.md.
)ref"},

    {"ctl status", R"ref(
Besides each category's state, status counts per category the events written, their bytes and the
events lost since the session began (exact: the writers count them in the mapping).
)ref"},
});

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

}  // namespace

std::string_view reference_text(std::string_view path) {
  for (const auto& [name, text] : kReference)
    if (name == path) return trimmed(text);
  return {};
}

}  // namespace chronicle::cli
