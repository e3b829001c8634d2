// Answers for a self-contained page (`chronicle view --html`): the page carries the whole
// (small) trace, and this computes the server's answers from it: windows by the server's level of
// detail (level_of_detail.ts, held to /api/window by viewer_html_windows), the rest with plain
// scans. Task details,
// critical paths included, are worked out here when asked for: the page carries each task's
// facts once (src/viewer/json_api.cpp, embedded_tasks_json), never a path per task.
import type {
  ArrowTuple, Backend, BlockTuple, CounterBreakdown, FlameAnswer, FlameMode, FlameSource, IdleTuple, MessageTuple, OffCpuTuple, Note, RangeStats, RunTuple, SearchHit,
  SpanDetails, SpanRef, SpanTuple, Summary, TaskBlockTuple, TaskDetails, TaskLineTuple, TaskRef, TaskRows, WindowAnswer,
} from './api';
import { criticalPath, TaskFacts } from './critical_path';
import { aggregateFlame, aggregateWholeFlame, WholeSpanTuple } from './flame_model';
import { ShownRows } from './task_rows';
import { bitWidth, columnOf, counterPoints, DetailRules, IntervalRow, intervalRow, lowerBound, runsInView, Scale, scaleOf, visibleInRow } from './level_of_detail';

export interface EmbeddedTasks {
  // begin, end (the line's: its resolution or its last run's end, whichever is later), row (tree
  // order), state, label, name (strings), kind, depth, descendants, row by time
  lines: [number, number, number, number, number, number, number, number, number, number][];
  facts: TaskFacts[];
  strings: string[];
  first: number;  // the trace's first event
  edges: number;
}

export interface EmbeddedTrace {
  summary: Summary;
  // A marker's text: a note's, or an instant's site (in `names`). A span piece: [begin, end, site,
  // its span in `whole`]; `busy`: in a span of its own or a task run (range stats' busy).
  lanes: { depths: number[][][]; runs?: [number, number, number][][]; idle: [number, number][]; off_cpu?: [number, number, number][];
           busy?: [number, number][]; markers: [number, string, string | number][] }[];
  whole?: WholeSpanTuple[];
  names: Record<string, string>;
  tasks: EmbeddedTasks;
  arrows: [number, number, number, number, number][];
  messages?: [number, number, number, number][];  // [from lane, to lane, send time, receive time]
  counters: ([number, number] | [number, number, number])[][];  // [time, value, lane when several threads wrote it]
  level_of_detail: DetailRules;  // the server's numbers
}

interface DetailRows {
  lanes: { depths: IntervalRow[]; runs: IntervalRow[]; idle: IntervalRow; offCpu: IntervalRow }[];
  taskRuns: IntervalRow[];
  // The tasks by time (src/viewer/task_time_rows.hpp), row by row: each alive to its resolution
  // or its last run's end, whichever is later; `tasks`: the task indexes of `row`'s intervals.
  timeRows: { tasks: number[]; row: IntervalRow }[];
  arrowsByLength: number[][];  // arrow indexes by the bit width of their length, each by begin
  arrowBegins: number[][];     // the arrows' begins, bucket by bucket
  counters: { times: number[]; values: number[] }[];
}

const kMaxListed = 50;
const kStates = ['ok', 'failed', 'cancelled', 'unresolved'];

// Who refers to each task: built once, the first time a task's details are asked for.
interface Referrers { children: number[][]; waitedBy: [number, number][][]; resolves: [number, number][][] }

export class LocalBackend implements Backend {
  readonly flamesOfSamples = false;
  private rowTask: number[] = [];  // tree row -> task index
  private referrers: Referrers | null = null;
  private detail: DetailRows | null = null;

  constructor(private trace: EmbeddedTrace) {
    trace.tasks.lines.forEach((task, k) => { this.rowTask[task[2]] = k; });
  }

  private text(k: number) { return this.trace.tasks.strings[k]; }
  private display(task: number) {
    const line = this.trace.tasks.lines[task];
    return this.text(line[4]) || this.text(line[5]);
  }
  private markerText(marker: [number, string, string | number]) {
    return typeof marker[2] === 'number' ? this.trace.names[marker[2]] ?? '?' : marker[2];
  }

  private taskRef(task: number): TaskRef {
    const line = this.trace.tasks.lines[task];
    const processes = this.trace.summary.processes ?? [];
    const process = Math.max(0, processes.findIndex(p => task >= p.first_task && task < p.first_task + p.tasks));
    return { index: task, process, id: this.trace.tasks.facts[task][0], display: this.display(task), begin: line[0], end: line[1], row: line[2], time_row: line[9] };
  }

  private taskReferrers(): Referrers {
    if (this.referrers) return this.referrers;
    const facts = this.trace.tasks.facts;
    const referrers: Referrers = { children: facts.map(() => []), waitedBy: facts.map(() => []), resolves: facts.map(() => []) };
    facts.forEach((f, k) => {
      if (f[4] >= 0 && f[8]) referrers.children[f[4]].push(k);
      if (f[5] >= 0 && f[3] !== null) referrers.resolves[f[5]].push([k, f[3]]);
      for (let w = 0; w < f[11].length; w += 2) referrers.waitedBy[f[11][w + 1]].push([k, f[11][w]]);
    });
    for (const list of referrers.waitedBy) list.sort((a, b) => a[1] - b[1]);
    for (const list of referrers.resolves) list.sort((a, b) => a[1] - b[1]);
    this.referrers = referrers;
    return referrers;
  }

  async summary() { return this.trace.summary; }

  // The server's level of detail (level_of_detail.ts), on rows built once; its caps and `more`.
  async window(from: number, to: number, width: number, rows?: TaskRows): Promise<WindowAnswer> {
    const rules = this.trace.level_of_detail;
    const scale = scaleOf(from, to, width);
    const names: Record<string, string> = {};
    const taskNames: Record<string, string> = {};
    const items = { kept: 0, cut: false };
    const room = () => {
      if (items.kept === rules.max_lane_items) { items.cut = true; return false; }
      ++items.kept;
      return true;
    };
    const lanes = this.trace.lanes.map((_, lane) => this.laneWindow(lane, scale, room, names, taskNames));
    const tasks = this.trace.tasks.lines;
    const byTime = rows?.by === 'time';
    const shown = new ShownRows(this.rowTask.length, byTime ? [] : (rows?.collapsed ?? []).map(k => ({ row: tasks[k][2], descendants: tasks[k][8] })));
    const askedLast = rows?.last ?? 0xffffffff;
    const first = rows?.first ?? 0;
    const last = Math.min(askedLast, first + rules.max_task_rows);
    const lines: TaskLineTuple[] = [];
    const blocks: TaskBlockTuple[] = [];
    const addLine = (task: number, row: number) => {
      const t = tasks[task], runs = this.detailRows().taskRuns[task];
      lines.push([t[0], t[1], row, task, t[3], t[6], t[7], t[8], runsInView(runs.begins, runs.ends, scale), t[2]]);
    };
    let rowCount = shown.count;
    let processRows = (this.trace.summary.processes ?? []).map(p => (p.first_task < tasks.length ? shown.shownRow(p.first_task) : shown.count));
    let rowOf = (task: number) => shown.shownRow(tasks[task][2]);
    if (byTime) {
      const timeRows = this.detailRows().timeRows;
      rowCount = timeRows.length;
      processRows = (this.trace.summary.processes ?? []).map(p => p.first_time_row ?? 0);
      rowOf = task => tasks[task][9];
      for (let row = first; row < Math.min(last, rowCount); ++row) {
        const { tasks: order, row: intervals } = timeRows[row];
        const merged: [number, number, number, number][] = [];
        visibleInRow(intervals, scale, rules.min_pixels, k => addLine(order[k], row), (b, e, count, k) => merged.push([b, e, count, k]));
        for (const [b, e, count, k] of merged) {
          if (count === 1) { addLine(order[k], row); continue; }
          const states = order.slice(k, k + count).map(task => tasks[task][3]);
          blocks.push([b, e, row, count, states.filter(state => state === 1).length, states.filter(state => state === 2).length]);
        }
      }
    } else {
      shown.treeRows(first, last).forEach((treeRow, k) => {
        const task = this.rowTask[treeRow], t = tasks[task];
        if (t[1] < scale.begin || t[0] > scale.end) return;
        addLine(task, first + k);
      });
    }
    // Whole task rows while their lines and blocks fit (json_api.cpp).
    const itemsOfRow = new Map<number, number>();
    for (const item of [...lines, ...blocks]) itemsOfRow.set(item[2], (itemsOfRow.get(item[2]) ?? 0) + 1);
    let rowsKeptEnd = Infinity, taskItems = 0;
    for (const [row, items] of [...itemsOfRow].sort((a, b) => a[0] - b[0])) {
      if (taskItems + items > rules.max_task_items) { rowsKeptEnd = row; break; }
      taskItems += items;
    }
    const keptLines = lines.filter(line => line[2] < rowsKeptEnd), keptBlocks = blocks.filter(block => block[2] < rowsKeptEnd);
    for (const line of keptLines) taskNames[line[3]] = this.display(line[3]);
    const arrows = this.arrowsInView(scale, rowOf, byTime, first, last);
    const messages = this.messagesInView(scale);
    const counters = this.detailRows().counters.map((series, counter) =>
      ({ counter, ...counterPoints(series.times, series.values, scale, rules.counter_points_per_pixel) }));
    return {
      begin: scale.begin, end: scale.end, width: scale.width, lanes, names,
      tasks: { lines: keptLines, blocks: keptBlocks, names: taskNames, rows: rowCount, first_row: Math.min(rowCount, first), process_rows: processRows },
      arrows: arrows.slice(0, rules.max_arrows), messages: messages.slice(0, rules.max_messages), counters,
      more: { rows: askedLast > last && rowCount > last, task_items: rowsKeptEnd !== Infinity, arrows: arrows.length > rules.max_arrows,
              messages: messages.length > rules.max_messages, lane_items: items.cut },
    };
  }

  // One lane's spans, runs, idle and off-CPU periods, each alone or in busy blocks, in the
  // server's order, while `room` says the answer has room.
  private laneWindow(laneNumber: number, scale: Scale, room: () => boolean, names: Record<string, string>, taskNames: Record<string, string>) {
    const lane = this.trace.lanes[laneNumber], rowsOf = this.detailRows().lanes[laneNumber];
    const minPixels = this.trace.level_of_detail.min_pixels;
    const wideSpans: [number, number][] = [], spanBlocks: BlockTuple[] = [];
    rowsOf.depths.forEach((row, depth) => visibleInRow(row, scale, minPixels, k => wideSpans.push([depth, k]),
      (b, e, count) => spanBlocks.push([b, e, depth, count])));
    const wideRuns: [number, number][] = [], runBlocks: BlockTuple[] = [];
    rowsOf.runs.forEach((row, depth) => visibleInRow(row, scale, minPixels, k => wideRuns.push([depth, k]),
      (b, e, count) => runBlocks.push([b, e, depth, count])));
    const wideIdle: number[] = [], idleBlocks: IdleTuple[] = [];
    visibleInRow(rowsOf.idle, scale, minPixels, k => wideIdle.push(k), (b, e, count) => idleBlocks.push([b, e, count]));
    const wideOff: number[] = [], offBlocks: OffCpuTuple[] = [];
    visibleInRow(rowsOf.offCpu, scale, minPixels, k => wideOff.push(k), (b, e, count) => offBlocks.push([b, e, count, -1]));

    const spans: SpanTuple[] = [];
    for (const [depth, k] of wideSpans) {
      if (!room()) break;
      const site = lane.depths[depth][k][2];
      spans.push([rowsOf.depths[depth].begins[k], rowsOf.depths[depth].ends[k], depth, k, site]);
      names[site] = this.trace.names[site];
    }
    const blocks = spanBlocks.filter(room);
    const runs: RunTuple[] = [];
    for (const [depth, k] of wideRuns) {
      if (!room()) break;
      const task = lane.runs![depth][k][2];
      runs.push([rowsOf.runs[depth].begins[k], rowsOf.runs[depth].ends[k], depth, task, this.trace.tasks.lines[task][6]]);
      taskNames[task] = this.display(task);
    }
    const keptRunBlocks = runBlocks.filter(room);
    const idle: IdleTuple[] = [];
    for (const k of wideIdle) if (room()) idle.push([rowsOf.idle.begins[k], rowsOf.idle.ends[k], 1]);
    idle.push(...idleBlocks.filter(room));
    const offCpu: OffCpuTuple[] = [];
    for (const k of wideOff) if (room()) offCpu.push([rowsOf.offCpu.begins[k], rowsOf.offCpu.ends[k], 1, lane.off_cpu![k][2]]);
    offCpu.push(...offBlocks.filter(room));
    return { lane: laneNumber, spans, blocks, runs, run_blocks: keptRunBlocks, idle, off_cpu: offCpu };
  }

  // window_arrows: by length class, those at the same pixel columns, rows and kind merged;
  // `rowOf`: a task's row as shown.
  private arrowsInView(scale: Scale, rowOf: (task: number) => number, byTime: boolean, first: number, last: number): ArrowTuple[] {
    const tasks = this.trace.tasks.lines;
    const arrows: ArrowTuple[] = [];
    const drawn = new Map<string, number>();
    const { arrowsByLength, arrowBegins } = this.detailRows();
    arrowsByLength.forEach((bucket, lengthClass) => {
      // No arrow of this class that begins before `earliest` reaches the window.
      const earliest = Math.max(scale.begin - (2 ** lengthClass - 1), 0);
      for (let i = lowerBound(arrowBegins[lengthClass], earliest); i < bucket.length && this.trace.arrows[bucket[i]][3] <= scale.end; ++i) {
        const a = this.trace.arrows[bucket[i]];
        if (a[4] < scale.begin) continue;
        const fromRow = rowOf(a[1]), toRow = rowOf(a[2]);
        if (Math.max(fromRow, toRow) < first || Math.min(fromRow, toRow) >= last) continue;
        if (!byTime && fromRow === toRow && tasks[a[1]][2] !== tasks[a[2]][2]) continue;  // both in one collapsed subtree
        const key = `${columnOf(scale, a[3])},${columnOf(scale, a[4])},${fromRow},${toRow},${a[0]}`;
        const at = drawn.get(key);
        if (at === undefined) { drawn.set(key, arrows.length); arrows.push([a[0], a[1], a[2], a[3], a[4], fromRow, toRow, 1]); }
        else arrows[at][7]++;
      }
    });
    return arrows;
  }

  // window_messages: in send order, those at the same pixel columns between the same lanes merged.
  private messagesInView(scale: Scale): MessageTuple[] {
    const messages: MessageTuple[] = [];
    const drawn = new Map<string, number>();
    const embedded = this.trace.messages ?? [];
    for (let k = 0; k < embedded.length && embedded[k][2] <= scale.end; ++k) {
      const m = embedded[k];
      if (Math.max(m[2], m[3]) < scale.begin) continue;
      const key = `${columnOf(scale, m[2])},${columnOf(scale, m[3])},${m[0]},${m[1]}`;
      const at = drawn.get(key);
      if (at === undefined) { drawn.set(key, messages.length); messages.push([m[0], m[1], m[2], m[3], 1]); }
      else messages[at][4]++;
    }
    return messages;
  }

  private timeRowsOf(): DetailRows['timeRows'] {
    const out: DetailRows['timeRows'] = Array.from({ length: this.trace.summary.time_rows ?? 0 }, () => ({ tasks: [], row: { begins: [], ends: [] } }));
    const lines = this.trace.tasks.lines;
    const byBegin = lines.map((_, k) => k).sort((a, b) => lines[a][0] - lines[b][0]);
    for (const task of byBegin) {
      const [begin, end] = lines[task];  // the line's end: already past its last run (line_end)
      const row = out[lines[task][9]];
      if (!row) continue;
      row.tasks.push(task);
      row.row.begins.push(begin);
      row.row.ends.push(end);
    }
    return out;
  }

  // The rows the level of detail searches, as the server's index holds them: built once.
  private detailRows(): DetailRows {
    if (this.detail) return this.detail;
    const taskRuns = this.trace.tasks.facts.map(f => ({ begins: f[10].map(r => r[1]), ends: f[10].map(r => Math.max(r[1], r[2])) }));
    const bucketOf = (a: [number, number, number, number, number]) => bitWidth(a[4] - a[3]);
    const arrowsByLength: number[][] = Array.from({ length: 65 }, () => []);
    this.trace.arrows.forEach((a, k) => arrowsByLength[bucketOf(a)].push(k));
    // Stable, as the server's: arrows that begin together keep the index's order.
    for (const bucket of arrowsByLength) bucket.sort((a, b) => this.trace.arrows[a][3] - this.trace.arrows[b][3]);
    this.detail = {
      lanes: this.trace.lanes.map(lane => ({
        depths: lane.depths.map(intervalRow), runs: (lane.runs ?? []).map(intervalRow),
        idle: intervalRow(lane.idle), offCpu: intervalRow(lane.off_cpu ?? []),
      })),
      taskRuns,
      timeRows: this.timeRowsOf(),
      arrowsByLength,
      arrowBegins: arrowsByLength.map(bucket => bucket.map(k => this.trace.arrows[k][3])),
      counters: this.trace.counters.map(samples => ({ times: samples.map(s => s[0]), values: samples.map(s => s[1]) })),
    };
    return this.detail;
  }

  private spanRef(lane: number, depth: number, index: number): SpanRef {
    const s = this.trace.lanes[lane].depths[depth][index];
    return { lane, depth, index, name: this.trace.names[s[2]], begin: s[0], end: s[1] };
  }

  async span(lane: number, depth: number, index: number): Promise<SpanDetails> {
    const ref = this.spanRef(lane, depth, index);
    const rows = this.trace.lanes[lane].depths;
    const parentIndex = depth > 0 ? rows[depth - 1].findIndex(s => s[0] <= ref.begin && s[1] >= ref.end) : -1;
    const children = (rows[depth + 1] ?? []).map((s, k) => [s, k] as const).filter(([s]) => s[0] >= ref.begin && s[0] <= ref.end);
    const info = this.trace.summary.lanes[lane];
    const wholeIndex = this.trace.lanes[lane].depths[depth][index][3];
    const whole = wholeIndex === undefined ? undefined : this.trace.whole?.[wholeIndex];
    const began = whole ? this.trace.summary.lanes[whole[3]] : undefined;
    return {
      ...ref, kind: 'span', duration: ref.end - ref.begin, thread: `${info.name} (${info.thread_id})`,
      ...(whole && began ? { span: { begin: whole[0], end: whole[1], wall_ns: whole[1] - whole[0], running_ns: whole[5], began_on: `${began.name} (${began.thread_id})` } } : {}),
      fields: { name: ref.name, depth },
      parent: parentIndex >= 0 ? this.spanRef(lane, depth - 1, parentIndex) : null,
      children: children.slice(0, 50).map(([, k]) => this.spanRef(lane, depth + 1, k)), children_count: children.length,
      notes: this.trace.lanes[lane].markers.filter(m => m[0] >= ref.begin && m[0] <= ref.end).slice(0, 50)
        .map(m => ({ time: m[0], type: m[1], text: this.markerText(m) })),
    };
  }

  async task(index: number): Promise<TaskDetails> {
    const tasks = this.trace.tasks, f = tasks.facts[index], line = tasks.lines[index];
    const resolved = f[3] === null ? null : Math.max(f[3], line[0]);
    const referrers = this.taskReferrers();
    const withTime = (task: number, time: number) => ({ ...this.taskRef(task), time });
    const runs = f[10].map(r => ({ thread: this.text(r[0]), begin: r[1], end: r[2], ended: r[3] === 1 }));
    const notes: Note[] = f[12].map(n => ({ time: n[0], type: this.text(n[1]), text: this.text(n[2]) }));
    const waitsOn: TaskRef[] = [];
    for (let w = 0; w < f[11].length && waitsOn.length < kMaxListed; w += 2) waitsOn.push(withTime(f[11][w + 1], f[11][w]));
    const children = referrers.children[index];
    const steps = criticalPath(tasks.facts, tasks.first, tasks.edges, index, task => this.text(tasks.facts[task][1])).map(step =>
      ({ ...this.taskRef(step.task), state: step.state, what: step.what, at: step.from, contributed: step.to - step.from }));
    return {
      ...this.taskRef(index), group: this.trace.summary.processes?.[this.taskRef(index).process ?? 0]?.group ?? '', kind: 'task', task_kind: this.text(f[1]), name: this.text(line[5]), label: this.text(line[4]),
      // line[1] is where the line ends, past the resolution when a run outlasts it (line_end).
      created: f[2] === null ? null : line[0], resolved, duration: (resolved ?? line[1]) - line[0],
      outcome: kStates[line[3]], outcome_text: this.text(f[6]), thread: f[7] === null ? null : this.text(f[7]),
      fields: { id: f[0], kind: this.text(f[1]), busy_ns: f[9], seen_created: f[8] === 1 },
      attributes: (f[14] ?? []).map(a => this.text(a)),
      runs, notes, notes_count: f[13],
      parent: f[4] >= 0 ? this.taskRef(f[4]) : null,
      children: children.slice(0, kMaxListed).map(k => this.taskRef(k)), children_count: children.length, descendants: line[8],
      waits_on: waitsOn,
      waited_by: referrers.waitedBy[index].slice(0, kMaxListed).map(([k, time]) => withTime(k, time)),
      resolved_by: f[5] >= 0 && f[3] !== null ? withTime(f[5], f[3]) : null,
      resolves: referrers.resolves[index].slice(0, kMaxListed).map(([k, time]) => withTime(k, time)),
      critical_path: { method: 'the runs, waits and resolutions that decided when it finished', steps },
    };
  }

  async search(text: string) {
    const needle = text.toLowerCase();
    const hits: SearchHit[] = [];
    let total = 0;  // every match, those past the first 100 included
    const found = (hit: () => SearchHit) => { if (total++ < 100) hits.push(hit()); };
    this.trace.tasks.lines.forEach((t, k) => {
      const display = this.display(k);
      if (display.toLowerCase().includes(needle) || this.text(t[5]).toLowerCase().includes(needle)) {
        found(() => ({ kind: 'task', text: display, ...this.taskRef(k) }));
        return;
      }
      const attribute = (this.trace.tasks.facts[k][14] ?? []).map(a => this.text(a)).find(a => a.toLowerCase().includes(needle));
      if (attribute !== undefined) found(() => ({ kind: 'task', text: `${display} (${attribute})`, ...this.taskRef(k) }));
    });
    this.trace.lanes.forEach((lane, l) => lane.depths.forEach((row, depth) => row.forEach((s, k) => {
      const name = this.trace.names[s[2]] ?? '';
      if (name.toLowerCase().includes(needle)) found(() => ({ kind: 'span', text: name, ...this.spanRef(l, depth, k) }));
    })));
    return { query: text, hits, total };
  }

  async flame(from: number, to: number, byThread = false, _source: FlameSource = 'spans', mode: FlameMode = 'wall'): Promise<FlameAnswer> {
    const threadNames = byThread ? this.trace.summary.lanes.map(lane => `${lane.name} (${lane.thread_id})`) : undefined;
    const nameOf = (site: number) => this.trace.names[site] ?? '?';
    if (mode === 'wall' && this.trace.whole) return aggregateWholeFlame(from, to, this.trace.whole, nameOf, threadNames);
    return aggregateFlame(from, to, this.trace.lanes.map(lane => lane.depths.map(row => row.map(s => [s[0], s[1], s[2]] as [number, number, number]))), nameOf, threadNames);
  }

  async counter(index: number, from: number, to: number): Promise<CounterBreakdown> {
    const info = this.trace.summary.counters[index], samples = this.trace.counters[index];
    const threads = info.lanes.map(lane => ({ lane, name: this.trace.summary.lanes[lane].name, thread_id: this.trace.summary.lanes[lane].thread_id,
                                              samples: 0, min: 0, max: 0, last: 0, added: 0 }));
    samples.forEach((sample, k) => {
      if (sample[0] < from || sample[0] > to) return;
      const share = threads.find(t => t.lane === (sample[2] ?? info.lane));
      if (!share) return;
      const value = sample[1];
      share.min = share.samples === 0 ? value : Math.min(share.min, value);
      share.max = share.samples === 0 ? value : Math.max(share.max, value);
      share.last = value;
      share.added += value - (k > 0 ? samples[k - 1][1] : 0);
      share.samples++;
    });
    return { index, name: info.name, kind: info.kind, begin: from, end: to, threads };
  }

  async stats(from: number, to: number): Promise<RangeStats> {
    const clip = (b: number, e: number) => Math.max(0, Math.min(e, to) - Math.max(b, from));
    type NameTotal = { name: string; spans: number; wall_ns: number; pieces: number; running_ns: number };
    const totals = new Map<string, NameTotal>();
    const totalOf = (site: number) => {
      const name = this.trace.names[site];
      let total = totals.get(name);
      if (!total) totals.set(name, total = { name, spans: 0, wall_ns: 0, pieces: 0, running_ns: 0 });
      return total;
    };
    (this.trace.whole ?? []).forEach(s => {
      if (s[1] < from || s[0] > to) return;
      const total = totalOf(s[2]);
      total.spans++; total.wall_ns += clip(s[0], s[1]);
    });
    const lanes = this.trace.lanes.map((lane, l) => {
      let spans = 0, busy = 0, idle = 0;
      lane.depths.forEach((row, depth) => row.forEach(s => {
        if (s[1] < from || s[0] > to) return;
        ++spans;
        if (depth === 0 && !lane.busy) busy += clip(s[0], s[1]);
        const total = totalOf(s[2]);
        total.pieces++; total.running_ns += clip(s[0], s[1]);
      }));
      (lane.busy ?? []).forEach(b => { if (b[1] >= from && b[0] <= to) busy += clip(b[0], b[1]); });
      lane.idle.forEach(i => { idle += clip(i[0], i[1]); });
      let blocked = 0, runnable = 0;
      (lane.off_cpu ?? []).forEach(o => { if (o[2] === 2) blocked += clip(o[0], o[1]); else runnable += clip(o[0], o[1]); });
      return { lane: l, name: this.trace.summary.lanes[l].name, spans, busy_ns: busy, idle_ns: idle, blocked_ns: blocked, runnable_ns: runnable };
    });
    const tasks = { overlapping: 0, created: 0, resolved: 0, failed: 0, cancelled: 0 };
    this.trace.tasks.lines.forEach((t, k) => {
      if (t[0] <= to && t[1] >= from) tasks.overlapping++;
      if (this.trace.tasks.facts[k][2] !== null && t[0] >= from && t[0] <= to) tasks.created++;
      if (t[3] !== 3 && t[1] >= from && t[1] <= to) { tasks.resolved++; if (t[3] === 1) tasks.failed++; if (t[3] === 2) tasks.cancelled++; }
    });
    const top = [...totals.values()].sort((a, b) => b.wall_ns - a.wall_ns).slice(0, 20);
    return { begin: from, end: to, lanes, top_names: top, names_complete: true, tasks };
  }
}
