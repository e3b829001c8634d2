// Answers for a self-contained page (`chronicle view --html`): the page carries the whole
// (small) trace, and this computes the server's answers from it with plain scans.
import type {
  ArrowTuple, Backend, BlockTuple, CounterPointTuple, IdleTuple, RangeStats, SearchHit, SpanDetails, SpanRef,
  SpanTuple, Summary, TaskBlockTuple, TaskDetails, TaskLineTuple, WindowAnswer,
} from './api';

export interface EmbeddedTrace {
  summary: Summary;
  lanes: { depths: [number, number, number][][]; idle: [number, number][]; markers: [number, string, string][] }[];
  names: Record<string, string>;
  tasks: [number, number, number, number, string, string][];  // begin, end, row, state, display, name
  task_details: TaskDetails[];
  arrows: [number, number, number, number, number][];
  counters: [number, number][][];
}

// Intervals of one row (sorted, not overlapping) as the window shows them: wide ones alone,
// runs of sub-pixel ones merged when less than a pixel apart.
function visibleInRow<T>(items: T[], begin: (item: T) => number, end: (item: T) => number, from: number, to: number,
                         nsPerPixel: number, wide: (k: number) => void, block: (b: number, e: number, first: number, count: number) => void) {
  let open: { b: number; e: number; first: number; count: number } | null = null;
  const flush = () => { if (open) block(open.b, open.e, open.first, open.count); open = null; };
  for (let k = 0; k < items.length; ++k) {
    const b = begin(items[k]), e = end(items[k]);
    if (e < from || b > to) continue;
    if (e - b >= nsPerPixel) { flush(); wide(k); continue; }
    if (open && b <= open.e + nsPerPixel) { open.e = Math.max(open.e, e); open.count++; }
    else { flush(); open = { b, e, first: k, count: 1 }; }
  }
  flush();
}

export class LocalBackend implements Backend {
  private rows: number[][] = [];  // task indexes per row, by begin

  constructor(private trace: EmbeddedTrace) {
    trace.tasks.forEach((task, k) => { (this.rows[task[2]] ??= []).push(k); });
    for (const row of this.rows) row?.sort((a, b) => trace.tasks[a][0] - trace.tasks[b][0]);
  }

  async summary() { return this.trace.summary; }

  async window(from: number, to: number, width: number): Promise<WindowAnswer> {
    const nsPerPixel = Math.max(to - from, 1) / Math.max(width, 1);
    const names: Record<string, string> = {};
    const lanes = this.trace.lanes.map((lane, laneNumber) => {
      const spans: SpanTuple[] = [], blocks: BlockTuple[] = [], idle: IdleTuple[] = [];
      lane.depths.forEach((row, depth) => visibleInRow(row, s => s[0], s => s[1], from, to, nsPerPixel,
        k => { spans.push([row[k][0], row[k][1], depth, k, row[k][2]]); names[row[k][2]] = this.trace.names[row[k][2]]; },
        (b, e, _first, count) => blocks.push([b, e, depth, count])));
      visibleInRow(lane.idle, s => s[0], s => s[1], from, to, nsPerPixel, k => idle.push([lane.idle[k][0], lane.idle[k][1], 1]),
        (b, e, _first, count) => idle.push([b, e, count]));
      return { lane: laneNumber, spans, blocks, idle };
    });
    const lines: TaskLineTuple[] = [], taskBlocks: TaskBlockTuple[] = [], taskNames: Record<string, string> = {};
    this.rows.forEach((row, rowNumber) => visibleInRow(row, k => this.trace.tasks[k][0], k => this.trace.tasks[k][1], from, to, nsPerPixel,
      k => { const t = this.trace.tasks[row[k]]; lines.push([t[0], t[1], rowNumber, row[k], t[3]]); taskNames[row[k]] = t[4]; },
      (b, e, first, count) => {
        const states = row.slice(first, first + count).map(k => this.trace.tasks[k][3]);
        taskBlocks.push([b, e, rowNumber, count, states.filter(s => s === 1).length, states.filter(s => s === 2).length]);
      }));
    const arrows: ArrowTuple[] = this.trace.arrows.filter(a => a[4] >= from && a[3] <= to)
      .map(a => [a[0], a[1], a[2], a[3], a[4], this.trace.tasks[a[1]][2], this.trace.tasks[a[2]][2], 1]);
    const counters = this.trace.counters.map((samples, counter) => {
      let first = samples.findIndex(s => s[0] >= from);
      if (first < 0) first = samples.length;
      const points: CounterPointTuple[] = [];
      for (let k = Math.max(first - 1, 0); k < samples.length && samples[k][0] <= to; ++k) points.push([samples[k][0], samples[k][1], samples[k][1], samples[k][1]]);
      return { counter, downsampled: false, points };
    });
    return { begin: from, end: to, width, lanes, names, tasks: { lines, blocks: taskBlocks, names: taskNames }, arrows, counters };
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
    return {
      ...ref, kind: 'span', duration: ref.end - ref.begin, thread: `${info.name} (${info.thread_id})`,
      fields: { name: ref.name, depth },
      parent: parentIndex >= 0 ? this.spanRef(lane, depth - 1, parentIndex) : null,
      children: children.slice(0, 50).map(([, k]) => this.spanRef(lane, depth + 1, k)), children_count: children.length,
      notes: this.trace.lanes[lane].markers.filter(m => m[0] >= ref.begin && m[0] <= ref.end).slice(0, 50)
        .map(m => ({ time: m[0], type: m[1], text: m[2] })),
    };
  }

  async task(index: number) { return this.trace.task_details[index]; }

  async search(text: string) {
    const needle = text.toLowerCase();
    const hits: SearchHit[] = [];
    this.trace.tasks.forEach((t, k) => {
      if (hits.length < 100 && (t[4].toLowerCase().includes(needle) || t[5].toLowerCase().includes(needle))) {
        const d = this.trace.task_details[k];
        hits.push({ kind: 'task', text: t[4], index: k, id: d.id, display: t[4], begin: t[0], end: t[1], row: t[2] });
      }
    });
    this.trace.lanes.forEach((lane, l) => lane.depths.forEach((row, depth) => row.forEach((s, k) => {
      const name = this.trace.names[s[2]] ?? '';
      if (hits.length < 100 && name.toLowerCase().includes(needle)) hits.push({ kind: 'span', text: name, ...this.spanRef(l, depth, k) });
    })));
    return { query: text, hits };
  }

  async stats(from: number, to: number): Promise<RangeStats> {
    const clip = (b: number, e: number) => Math.max(0, Math.min(e, to) - Math.max(b, from));
    const totals = new Map<string, { name: string; count: number; total_ns: number }>();
    const lanes = this.trace.lanes.map((lane, l) => {
      let spans = 0, busy = 0, idle = 0;
      lane.depths.forEach((row, depth) => row.forEach(s => {
        if (s[1] < from || s[0] > to) return;
        ++spans;
        if (depth === 0) busy += clip(s[0], s[1]);
        const name = this.trace.names[s[2]];
        const total = totals.get(name) ?? { name, count: 0, total_ns: 0 };
        total.count++; total.total_ns += clip(s[0], s[1]);
        totals.set(name, total);
      }));
      lane.idle.forEach(i => { idle += clip(i[0], i[1]); });
      return { lane: l, name: this.trace.summary.lanes[l].name, spans, busy_ns: busy, idle_ns: idle };
    });
    const tasks = { overlapping: 0, created: 0, resolved: 0, failed: 0, cancelled: 0 };
    this.trace.tasks.forEach((t, k) => {
      if (t[0] <= to && t[1] >= from) tasks.overlapping++;
      if (this.trace.task_details[k].created !== null && t[0] >= from && t[0] <= to) tasks.created++;
      if (t[3] !== 3 && t[1] >= from && t[1] <= to) { tasks.resolved++; if (t[3] === 1) tasks.failed++; if (t[3] === 2) tasks.cancelled++; }
    });
    const top = [...totals.values()].sort((a, b) => b.total_ns - a.total_ns).slice(0, 20);
    return { begin: from, end: to, lanes, top_names: top, names_complete: true, tasks };
  }
}
