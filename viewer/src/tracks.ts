// Tracks in groups: per process (host · process), its threads, its tasks and its counters, each
// group under a header that collapses it on a click and moves it up or down among its process's
// groups (▲ ▼ on the header). The tasks group comes right after the threads, before the
// counters, unless moved. Pure layout: where each thing goes, in page pixels from the top.
import type { Summary } from './api';

export const RULER_HEIGHT = 24;
export const LANE_HEADER = 16;
export const SPAN_ROW = 16;
export const COUNTER_TRACK = 40;
export const TASK_ROW = 14;
export const SECTION_GAP = 6;

export type SectionKind = 'threads' | 'tasks' | 'counters';

export interface Header {
  key: string;             // "process:N" or "process:N/threads" ...: what collapsed/moved refer to
  top: number;
  label: string;
  collapsed: boolean;
  level: 0 | 1;            // 0 a process, 1 a group in it
  up: boolean;             // can move up / down among its process's groups
  down: boolean;
}

export interface Layout {
  headers: Header[];
  laneTop: (number | undefined)[];     // y of each lane's header; undefined when collapsed
  counterTop: (number | undefined)[];
  tasksTop: number | undefined;        // y of task row 0; undefined when not shown
  height: number;
}

export interface TrackState {
  collapsed: Set<string>;
  order: Map<number, SectionKind[]>;  // per process, its groups in order
}

export function laneHeight(summary: Summary, lane: number) {
  const info = summary.lanes[lane];
  return LANE_HEADER + ((info.run_depths ?? 0) + Math.max(info.depths, 1)) * SPAN_ROW + SECTION_GAP;
}

// The processes in the order their lanes come, with their lanes and counters; the tasks belong
// to the first (the viewer shows the first trace's task graph).
export function processes(summary: Summary) {
  const out: { name: string; lanes: number[]; counters: number[] }[] = [];
  const byName = new Map<string, number>();
  summary.lanes.forEach((lane, k) => {
    const name = lane.group ?? '';
    if (!byName.has(name)) { byName.set(name, out.length); out.push({ name, lanes: [], counters: [] }); }
    out[byName.get(name)!].lanes.push(k);
  });
  summary.counters.forEach((counter, k) => {
    const process = byName.get(summary.lanes[counter.lane]?.group ?? '') ?? 0;
    out[process]?.counters.push(k);
  });
  return out;
}

export function sectionOrder(state: TrackState, process: number): SectionKind[] {
  return state.order.get(process) ?? ['threads', 'tasks', 'counters'];
}

export function moveSection(state: TrackState, process: number, section: SectionKind, by: -1 | 1) {
  const order = [...sectionOrder(state, process)];
  const at = order.indexOf(section), to = at + by;
  if (at < 0 || to < 0 || to >= order.length) return;
  [order[at], order[to]] = [order[to], order[at]];
  state.order.set(process, order);
}

export function computeLayout(summary: Summary, state: TrackState, taskRows: number): Layout {
  const layout: Layout = { headers: [], laneTop: summary.lanes.map(() => undefined), counterTop: summary.counters.map(() => undefined), tasksTop: undefined, height: 0 };
  let y = RULER_HEIGHT;
  const all = processes(summary);
  all.forEach((process, p) => {
    const processKey = `process:${p}`;
    const processCollapsed = state.collapsed.has(processKey);
    if (all.length > 1) {
      layout.headers.push({ key: processKey, top: y, label: process.name, collapsed: processCollapsed, level: 0, up: false, down: false });
      y += LANE_HEADER;
      if (processCollapsed) return;
    }
    const sections = sectionOrder(state, p).filter(kind =>
      kind === 'threads' ? process.lanes.length > 0 : kind === 'tasks' ? p === 0 && summary.tasks > 0 : process.counters.length > 0);
    sections.forEach((kind, k) => {
      const key = `${processKey}/${kind}`;
      const collapsed = state.collapsed.has(key);
      const label = kind === 'threads' ? `threads · ${process.lanes.length}`
        : kind === 'tasks' ? `tasks · ${summary.tasks.toLocaleString()} in tree order · arrows: created (grey), waits (blue), resolutions (green)`
        : `counters · ${process.counters.length}`;
      layout.headers.push({ key, top: y, label, collapsed, level: 1, up: k > 0, down: k + 1 < sections.length });
      y += LANE_HEADER;
      if (collapsed) return;
      if (kind === 'threads') {
        for (const lane of process.lanes) { layout.laneTop[lane] = y; y += laneHeight(summary, lane); }
      } else if (kind === 'tasks') {
        layout.tasksTop = y;
        y += taskRows * TASK_ROW + SECTION_GAP;
      } else {
        for (const counter of process.counters) { layout.counterTop[counter] = y; y += LANE_HEADER + COUNTER_TRACK + SECTION_GAP; }
      }
    });
  });
  layout.height = y;
  return layout;
}

// The task rows [first, last) the screen shows from `scrollTop`, with a margin.
export function visibleTaskRows(layout: Layout, taskRows: number, scrollTop: number, screenHeight: number): [number, number] {
  if (layout.tasksTop === undefined) return [0, 0];
  const margin = 20;
  const first = Math.floor((scrollTop - layout.tasksTop) / TASK_ROW) - margin;
  const last = Math.ceil((scrollTop + screenHeight - layout.tasksTop) / TASK_ROW) + margin;
  const clamp = (row: number) => Math.max(0, Math.min(row, taskRows));
  return [clamp(first), clamp(last)];
}
