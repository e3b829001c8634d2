// The shapes `chronicle view` answers with (src/viewer/json_api.cpp), and the two places
// answers come from: the server, or the data a self-contained page carries.

// `group`: the lane's process, "host · process (pid N)"; a view of several processes heads each
// process's lanes with it.
// `run_depths`: rows of task runs (nested runs go deeper), drawn above the spans.
// `off_cpu`: stretches when the thread was off its CPU (a trace recorded with --sched); `samples`:
// its stack samples (--sample).
export interface LaneInfo { thread_id: number; name: string; group?: string; depths: number; run_depths?: number; runs?: number; spans: number;
  lost?: [number, number, number][];  // where the thread lost events: [begin, end, count]
  idle: number; off_cpu?: number; samples?: number }
// One series: every call site and thread of a name; `lanes` lists the threads that wrote it.
export interface CounterInfo { name: string; kind: string; lane: number; lanes: number[]; min: number; max: number; samples: number }
export interface Summary {
  title: string; duration: number; origin_unix_ns: number; events: number;
  // `time_rows`: the rows of the tasks by time (each reused once its task has ended).
  lanes: LaneInfo[]; tasks: number; task_rows: number; time_rows?: number; wait_arrows: number; resolve_arrows: number;
  created_arrows?: number; task_kinds?: string[];
  messages?: number;  // sent in one process, received in another
  message_lanes?: [number, number, number][];  // [from lane, to lane, messages]
  counters: CounterInfo[];
  warnings?: string[];  // what was lost or skipped: shown above the timeline
  // Per trace: its group (as its lanes') and its tasks, the tree rows [first_task, first_task + tasks)
  // and by time the rows [first_time_row, first_time_row + time_rows).
  processes?: { group: string; first_task: number; tasks: number; first_time_row?: number; time_rows?: number; first_lane: number }[];
}

// [begin, end, depth, index, site]
// [begin, end, depth, index, site, attribute matched]: the last only when the window was asked
// with a search text (1: one of the span's attributes contains it).
export type SpanTuple = [number, number, number, number, number, number?];
// [begin, end, depth, merged count]
export type BlockTuple = [number, number, number, number];
// [begin, end, merged count]
export type IdleTuple = [number, number, number];
// The thread off its CPU: [begin, end, merged count, state: 1 runnable (preempted), 2 blocked, -1 both merged]
export type OffCpuTuple = [number, number, number, number];
// A lane's samples as ticks: [first, last, count], those less than a pixel apart merged.
export type SampleTuple = [number, number, number];
// [begin, end, row as shown, task index, state: 0 ok, 1 failed, 2 cancelled, 3 unresolved, kind,
//  depth in the tree, descendants, runs [begin, end, begin, end...] (merged under a pixel), row in the tree]
export type TaskLineTuple = [number, number, number, number, number, number, number, number, number[], number];
// A task run on a thread: [begin, end, nesting depth, task index, kind]
export type RunTuple = [number, number, number, number, number];
// Tasks by time too narrow to draw apart, merged on their row: [begin, end, row, count, failed, cancelled]
export type TaskBlockTuple = [number, number, number, number, number, number];
// [kind: 0 wait, 1 resolve, 2 created, from task, to task, from time, to time, from row, to row (as shown), merged]
export type ArrowTuple = [number, number, number, number, number, number, number, number];
// A message sent in one process and received in another: [from lane, to lane, send time, receive time, merged]
export type MessageTuple = [number, number, number, number, number];
// [time, min, max, last]
export type CounterPointTuple = [number, number, number, number];

export interface LaneWindow { lane: number; spans: SpanTuple[]; blocks: BlockTuple[]; runs?: RunTuple[]; run_blocks?: BlockTuple[]; idle: IdleTuple[]; off_cpu?: OffCpuTuple[]; samples?: SampleTuple[] }
// Which task rows to answer for: shown rows [first, last) once the subtrees of `collapsed` (task
// indexes) are taken out; `by` 'time': the rows of the tasks by time (nothing collapses).
export interface TaskRows { first: number; last: number; collapsed: number[]; by?: 'time' | 'tree' }
export interface WindowAnswer {
  begin: number; end: number; width: number;
  lanes: LaneWindow[];
  names: Record<string, string>;
  // `rows`: how many rows there are once the collapsed subtrees are out.
  tasks: { lines: TaskLineTuple[]; blocks: TaskBlockTuple[]; names: Record<string, string>; rows?: number; first_row?: number; process_rows?: number[] };
  arrows: ArrowTuple[];
  messages?: MessageTuple[];
  counters: { counter: number; downsampled: boolean; points: CounterPointTuple[] }[];
  // What the server left out to keep an answer to a screen's worth (docs/viewer.md): the page
  // asks for the rows it shows, so `rows` is cut only when it asks for more than 2,000.
  more?: { rows: boolean; task_items?: boolean; arrows: boolean; messages: boolean; lane_items: boolean };
}

// `row`: in the tree; `time_row`: by time.
export interface TaskRef { index: number; process?: number; group?: string; id: string; display: string; begin: number; end: number; row: number; time_row?: number; time?: number; via?: string }
export interface SpanRef { lane: number; depth: number; index: number; name: string; begin: number; end: number }
export interface Note { time: number; type: string; text: string }
export interface TaskDetails extends TaskRef {
  kind: 'task'; task_kind: string; name: string; label: string; created: number | null; resolved: number | null;
  duration: number; outcome: string; outcome_text: string; thread: string | null; fields: Record<string, unknown>;
  attributes?: string[];  // its own, "key = value" (CHRONICLE_SPAN_ATTRIBUTE while it holds no span open)
  runs: { thread: string; begin: number; end: number; ended: boolean }[]; notes: Note[]; notes_count: number;
  parent: TaskRef | null; children: TaskRef[]; children_count: number; descendants: number;  // in its subtree
  waits_on: TaskRef[]; waited_by: TaskRef[]; resolved_by: TaskRef | null; resolves: TaskRef[];
  critical_path: { method: string; steps: (TaskRef & { state: 'ran' | 'queued' | 'waiting' | 'blocked'; what: string; at: number; contributed: number })[] };
}
// A span as drawn is a piece of it (a task's span has one per run of its task; docs/viewer.md, "A
// span's time"): `duration` is the piece's, `span` the whole span's wall and running times.
export interface SpanDetails extends SpanRef {
  kind: 'span'; duration: number; thread: string; fields: Record<string, unknown>;
  span?: { begin: number; end: number; wall_ns: number; running_ns: number; began_on: string };
  parent: SpanRef | null; children: SpanRef[]; children_count: number; notes: Note[];
  attributes?: string[];  // "key = value" (CHRONICLE_SPAN_ARGS, another service's OTLP attributes), then "status = error: …"
}
export type SearchHit = (TaskRef & { kind: 'task'; text: string }) | (SpanRef & { kind: 'span'; text: string });
export interface RangeStats {
  begin: number; end: number;
  lanes: { lane: number; name: string; spans: number; busy_ns: number; idle_ns: number; blocked_ns?: number; runnable_ns?: number; samples?: number }[];
  // Per name: whole spans and their wall time, pieces and their running time, clipped to the range.
  top_names: { name: string; spans: number; wall_ns: number; pieces: number; running_ns: number }[]; names_complete: boolean;
  tasks: { overlapping: number; created: number; resolved: number; failed: number; cancelled: number };
}

// The first hits (at most 100 unless asked) and how many matched in all.
export interface SearchAnswer { query: string; hits: SearchHit[]; total: number }

// The flame graph of the spans in a range (src/analysis/flame_graph.hpp): frames depth-first,
// each [parent (-1: the root), name (index into `names`, -1: the root), total ns, self ns, count],
// a frame's children largest first. `source`: what was aggregated, "spans", or "samples" (the call
// stacks of the samples, by function; totals and self are then sample counts, not ns).
// Split by thread (`by` "thread"): under the root a frame per thread with spans in the range,
// named as its lane, holding that thread's frames; `threads` lists [frame, lane] for each.
// `mode` (spans only): "wall", whole spans from begin to end, suspension included (count: spans),
// or "running", the pieces of spans on threads (count: pieces).
export type FlameSource = 'spans' | 'samples';
export type FlameMode = 'wall' | 'running';
export type FlameFrameTuple = [number, number, number, number, number];
export interface FlameAnswer {
  begin: number; end: number; source: FlameSource; mode?: FlameMode; names: string[]; frames: FlameFrameTuple[];
  by?: 'thread'; threads?: [number, number][];
}

// A counter track broken down by the threads that wrote it, over a range.
export interface CounterBreakdown {
  index: number; name: string; kind: string; begin: number; end: number;
  threads: { lane: number; name: string; thread_id: number; samples: number; min: number; max: number; last: number; added: number }[];
}

export interface Backend {
  // Whether flame() can aggregate samples (the server can; a self-contained page has no stacks).
  readonly flamesOfSamples: boolean;
  summary(): Promise<Summary>;
  // `match`: the search text, whose spans found by an attribute the answer marks.
  window(begin: number, end: number, width: number, rows?: TaskRows, match?: string): Promise<WindowAnswer>;
  span(lane: number, depth: number, index: number): Promise<SpanDetails>;
  task(index: number): Promise<TaskDetails>;
  search(text: string): Promise<SearchAnswer>;
  stats(begin: number, end: number): Promise<RangeStats>;
  flame(begin: number, end: number, byThread?: boolean, source?: FlameSource, mode?: FlameMode): Promise<FlameAnswer>;
  counter(index: number, begin: number, end: number): Promise<CounterBreakdown>;
}

async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ?? response.statusText);
  return body as T;
}

export class HttpBackend implements Backend {
  readonly flamesOfSamples = true;
  summary() { return getJson<Summary>('api/summary'); }
  window(begin: number, end: number, width: number, rows?: TaskRows, match?: string) {
    const taskRows = rows ? `&rows=${rows.first}-${rows.last}&collapsed=${rows.collapsed.join(',')}${rows.by === 'time' ? '&by=time' : ''}` : '';
    const marks = match ? `&match=${encodeURIComponent(match)}` : '';
    return getJson<WindowAnswer>(`api/window?begin=${Math.floor(begin)}&end=${Math.ceil(end)}&width=${Math.round(width)}${taskRows}${marks}`);
  }
  span(lane: number, depth: number, index: number) { return getJson<SpanDetails>(`api/span?lane=${lane}&depth=${depth}&index=${index}`); }
  task(index: number) { return getJson<TaskDetails>(`api/task?index=${index}`); }
  search(text: string) { return getJson<SearchAnswer>(`api/search?q=${encodeURIComponent(text)}`); }
  stats(begin: number, end: number) { return getJson<RangeStats>(`api/stats?begin=${Math.floor(begin)}&end=${Math.ceil(end)}`); }
  flame(begin: number, end: number, byThread = false, source: FlameSource = 'spans', mode: FlameMode = 'wall') {
    return getJson<FlameAnswer>(`api/flame?begin=${Math.floor(begin)}&end=${Math.ceil(end)}${byThread ? '&by=thread' : ''}` +
      (source === 'samples' ? '&source=samples' : '') + (mode === 'running' ? '&mode=running' : ''));
  }
  counter(index: number, begin: number, end: number) {
    return getJson<CounterBreakdown>(`api/counter?index=${index}&begin=${Math.max(0, Math.floor(begin))}&end=${Math.ceil(end)}`);
  }
}
