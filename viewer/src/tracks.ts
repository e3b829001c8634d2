// Tracks in groups: per process (host · process), its threads, its tasks, its counters and
// chronicle's own counters (the monitor's: `chronicle/...`, collapsed on opening), each
// (with several processes, every process's threads come first; computeLayout), each
// group under a header that collapses it on a click and moves it up or down among its process's
// groups (▲ ▼ on the header). The tasks group comes right after the threads, before the
// counters, unless moved. Each process's tasks are a run of the task rows (by time, or in tree
// order, within the process), drawn in its own tasks group. Pure layout: where each thing goes,
// in page pixels from the top.
import type { Summary } from './api';

export const RULER_HEIGHT = 24;
export const LANE_HEADER = 16;
export const SPAN_ROW = 16;
export const COUNTER_TRACK = 40;
export const TASK_ROW = 14;
export const SECTION_GAP = 6;

export type SectionKind = 'threads' | 'tasks' | 'counters' | 'monitor';

// chronicle's own counters (events, bytes, losses, its CPU): a group apart from the program's.
export const isMonitorCounter = (name: string) => name.startsWith('chronicle/');

export interface Header {
  key: string;             // "process:N" or "process:N/threads" ...: what collapsed/moved refer to
  top: number;
  label: string;
  collapsed: boolean;
  level: 0 | 1;            // 0 a process, 1 a group in it
  up: boolean;             // can move up / down among its process's groups
  down: boolean;
  pinnable: boolean;       // it can be pinned: any group of a one-process view; in a view of several, any but the threads (always pinned)
  pinned: boolean;
}

export interface Layout {
  headers: Header[];
  laneTop: (number | undefined)[];     // y of each lane's header; undefined when collapsed
  counterTop: (number | undefined)[];
  // The task groups laid out (open), in row order: shown rows [first, last) from `top`.
  taskGroups: { process: number; first: number; last: number; top: number }[];
  height: number;
  // Where the pinned groups end (their headers included): they come first, and can stay on screen
  // while the rest scrolls (main.ts pins them when they fit). By default the threads; any group
  // the user pins (TrackState.pins), in a view of several processes after every process's threads,
  // which stay pinned. RULER_HEIGHT when none is open.
  lanesEnd: number;
}

export interface TrackState {
  collapsed: Set<string>;
  order: Map<number, SectionKind[]>;  // per process, its groups in order
  pins?: Map<string, boolean>;        // groups pinned or not by the user (by default the threads are)
}

// Whether a group is pinned: as the user said, else when it is the threads.
export function isPinned(state: TrackState, key: string) {
  return state.pins?.get(key) ?? key.endsWith('/threads');
}

export function laneHeight(summary: Summary, lane: number) {
  const info = summary.lanes[lane];
  return LANE_HEADER + ((info.run_depths ?? 0) + Math.max(info.depths, 1)) * SPAN_ROW + SECTION_GAP;
}

// A process's tracks: its tasks are the tree rows [firstTask, firstTask + tasks) and by time the
// rows [firstTimeRow, firstTimeRow + timeRows).
export interface ProcessTracks {
  name: string; lanes: number[]; counters: number[]; monitor: number[];
  tasks: number; firstTask: number; firstTimeRow: number; timeRows: number;
}

// How the tasks are laid out: by time (packed rows, each reused once its task has ended: the
// server's, src/viewer/task_time_rows.hpp) or as the tree (a row per task after its creator).
export type TaskOrder = 'time' | 'tree';

// The processes in the order their lanes come, with their lanes, counters and tasks (as
// summary.processes has them; without it, all the tasks are the first process's).
export function processes(summary: Summary) {
  const out: ProcessTracks[] = [];
  const byName = new Map<string, number>();
  summary.lanes.forEach((lane, k) => {
    const name = lane.group ?? '';
    if (!byName.has(name)) { byName.set(name, out.length); out.push({ name, lanes: [], counters: [], monitor: [], tasks: 0, firstTask: 0, firstTimeRow: 0, timeRows: 0 }); }
    out[byName.get(name)!].lanes.push(k);
  });
  if (out.length === 0) out.push({ name: '', lanes: [], counters: [], monitor: [], tasks: 0, firstTask: 0, firstTimeRow: 0, timeRows: 0 });
  if (summary.processes) {
    for (const process of summary.processes) {
      const found = out[byName.get(process.group) ?? -1];
      if (found) {
        found.tasks = process.tasks; found.firstTask = process.first_task;
        found.firstTimeRow = process.first_time_row ?? 0; found.timeRows = process.time_rows ?? 0;
      }
    }
  } else {
    out[0].tasks = summary.tasks;
    out[0].timeRows = summary.time_rows ?? 0;
  }
  summary.counters.forEach((counter, k) => {
    const process = byName.get(summary.lanes[counter.lane]?.group ?? '') ?? 0;
    (isMonitorCounter(counter.name) ? out[process]?.monitor : out[process]?.counters)?.push(k);
  });
  return out;
}

// The order processes' lanes come in a view of several: a chain in which those that exchanged
// the most messages are neighbours, so that their arrows cross no other process's lanes (a
// client, its gateway and the gateway's backend come in that order; of a server's many clients,
// two sit beside it). It starts from the pair with the most messages and adds, at either end,
// the process with the most messages to that end; those with none come last, in their order.
export function processOrder(summary: Summary, all: ProcessTracks[]): number[] {
  const processOfLane = new Map<number, number>();
  all.forEach((process, p) => process.lanes.forEach(lane => processOfLane.set(lane, p)));
  const weight = all.map(() => all.map(() => 0));
  for (const [from, to, count] of summary.message_lanes ?? []) {
    const p = processOfLane.get(from), q = processOfLane.get(to);
    if (p === undefined || q === undefined || p === q) continue;
    weight[p][q] += count;
    weight[q][p] += count;
  }
  const order: number[] = [];
  const left = new Set(all.map((_, p) => p));
  const take = (p: number, atStart: boolean) => { left.delete(p); if (atStart) order.unshift(p); else order.push(p); };
  let heaviest: [number, number, number] = [0, -1, -1];
  for (let p = 0; p < all.length; ++p)
    for (let q = p + 1; q < all.length; ++q) if (weight[p][q] > heaviest[0]) heaviest = [weight[p][q], p, q];
  if (heaviest[1] < 0) return all.map((_, p) => p);
  take(heaviest[1], false);
  take(heaviest[2], false);
  for (;;) {
    let best: [number, number, boolean] = [0, -1, false];  // messages, process, at the start
    for (const p of left) {
      const toStart = weight[p][order[0]], toEnd = weight[p][order[order.length - 1]];
      if (toStart > best[0]) best = [toStart, p, true];
      if (toEnd > best[0]) best = [toEnd, p, false];
    }
    if (best[1] < 0) break;
    take(best[1], best[2]);
  }
  for (const p of [...left].sort((a, b) => a - b)) take(p, false);
  return order;
}

export function sectionOrder(state: TrackState, process: number): SectionKind[] {
  return state.order.get(process) ?? ['threads', 'tasks', 'counters', 'monitor'];
}

// In a view of several processes, a process's tasks open with the view only up to this many:
// more would push the next process's lanes (and the messages between them) off the first screen.
export const MERGED_TASKS_OPEN_LIMIT = 200;

// The groups collapsed when a trace opens: each process's monitor counters, and in a view of
// several processes, the tasks of those with many.
export function defaultCollapsed(summary: Summary): string[] {
  const all = processes(summary);
  return all.flatMap((process, p) => [
    ...(process.monitor.length > 0 ? [`process:${p}/monitor`] : []),
    ...(all.length > 1 && process.tasks > MERGED_TASKS_OPEN_LIMIT ? [`process:${p}/tasks`] : []),
  ]);
}

export function moveSection(state: TrackState, process: number, section: SectionKind, by: -1 | 1) {
  const order = [...sectionOrder(state, process)];
  const at = order.indexOf(section), to = at + by;
  if (at < 0 || to < 0 || to >= order.length) return;
  [order[at], order[to]] = [order[to], order[at]];
  state.order.set(process, order);
}

// `firstRowOf`: the row a process's tasks begin on as shown: by time its first time row; in the
// tree, its first task's (ShownRows.shownRow, once collapsed subtrees are out).
export function computeLayout(summary: Summary, state: TrackState, taskRows: number,
                              firstRowOf: (process: ProcessTracks) => number = process => process.firstTask, order: TaskOrder = 'tree'): Layout {
  const layout: Layout = { headers: [], laneTop: summary.lanes.map(() => undefined), counterTop: summary.counters.map(() => undefined), taskGroups: [], height: 0, lanesEnd: RULER_HEIGHT };
  let y = RULER_HEIGHT;
  const all = processes(summary);
  // A process's first tree row holds one of its roots: never hidden.
  const firstRows = all.map(process => process.tasks > 0 ? firstRowOf(process) : -1);
  const rowsOf = (p: number): [number, number] => {
    let last = taskRows;
    for (let q = 0; q < all.length; ++q)
      if (firstRows[q] > firstRows[p] && firstRows[q] < last) last = firstRows[q];
    return [firstRows[p], last];
  };
  // One process: its groups in their order. Several: every process's threads first, each under
  // its process's header, so that the messages between their lanes cross no other rows (the
  // processes ordered by the messages between them: processOrder); then the other groups the user
  // pinned, and then the rest, each process's in their order, under headers that name the
  // process. Only the others move, and only they can be pinned or not.
  const several = all.length > 1;
  const sectionsOf = (p: number) => sectionOrder(state, p).filter(kind => {
    const process = all[p];
    return kind === 'threads' ? process.lanes.length > 0 : kind === 'tasks' ? process.tasks > 0 : process[kind].length > 0;
  });
  const placeSection = (p: number, kind: SectionKind, movable: SectionKind[]) => {
    const process = all[p];
    const key = `process:${p}/${kind}`;
    const collapsed = state.collapsed.has(key);
    const label = kind === 'threads' ? `threads · ${process.lanes.length}`
      : kind === 'tasks' ? `tasks · ${process.tasks.toLocaleString()} ${order === 'time' ? `by time on ${process.timeRows.toLocaleString()} rows` : 'in tree order'} · arrows: created (grey), waits (blue), resolutions (green)`
      : kind === 'counters' ? `counters · ${process.counters.length}`
      : `chronicle's own counters · ${process.monitor.length}`;
    const at = movable.indexOf(kind);
    const pinnable = !several || kind !== 'threads';
    layout.headers.push({ key, top: y, label: several && kind !== 'threads' ? `${process.name} · ${label}` : label, collapsed, level: 1,
                          up: at > 0, down: at >= 0 && at + 1 < movable.length, pinnable, pinned: pinnable && isPinned(state, key) });
    y += LANE_HEADER;
    if (collapsed) return;
    if (kind === 'threads') {
      for (const lane of process.lanes) { layout.laneTop[lane] = y; y += laneHeight(summary, lane); }
    } else if (kind === 'tasks') {
      const [first, last] = rowsOf(p);
      layout.taskGroups.push({ process: p, first, last, top: y });
      y += (last - first) * TASK_ROW + SECTION_GAP;
    } else {
      for (const counter of process[kind]) { layout.counterTop[counter] = y; y += LANE_HEADER + COUNTER_TRACK + SECTION_GAP; }
    }
  };
  const collapsedProcess = (p: number) => several && state.collapsed.has(`process:${p}`);
  const processesInOrder = several ? processOrder(summary, all) : [0];
  processesInOrder.forEach(p => {
    const process = all[p];
    if (several) {
      layout.headers.push({ key: `process:${p}`, top: y, label: process.name, collapsed: collapsedProcess(p), level: 0, up: false, down: false,
                            pinnable: false, pinned: false });
      y += LANE_HEADER;
      if (collapsedProcess(p)) return;
      if (sectionsOf(p).includes('threads')) placeSection(p, 'threads', []);
      return;
    }
    // The pinned groups first, in their order, then the others.
    const sections = sectionsOf(p);
    const pinned = sections.filter(kind => isPinned(state, `process:${p}/${kind}`));
    for (const kind of pinned) placeSection(p, kind, sections);
    if (pinned.some(kind => !state.collapsed.has(`process:${p}/${kind}`))) layout.lanesEnd = y;
    for (const kind of sections) if (!pinned.includes(kind)) placeSection(p, kind, sections);
  });
  if (several) {
    const othersOf = (p: number) => collapsedProcess(p) ? [] : sectionsOf(p).filter(kind => kind !== 'threads');
    const pinnedOf = (p: number) => othersOf(p).filter(kind => isPinned(state, `process:${p}/${kind}`));
    processesInOrder.forEach(p => { for (const kind of pinnedOf(p)) placeSection(p, kind, othersOf(p)); });
    const pinnedOpen = processesInOrder.some(p => pinnedOf(p).some(kind => !state.collapsed.has(`process:${p}/${kind}`)));
    if (pinnedOpen || layout.laneTop.some(top => top !== undefined)) layout.lanesEnd = y;
    processesInOrder.forEach(p => {
      const pinned = pinnedOf(p);
      for (const kind of othersOf(p)) if (!pinned.includes(kind)) placeSection(p, kind, othersOf(p));
    });
  }
  layout.height = y;
  return layout;
}

// The top of a shown task row; undefined when its group is not laid out (collapsed).
export function taskRowY(layout: Layout, row: number): number | undefined {
  for (const group of layout.taskGroups)
    if (row >= group.first && row < group.last) return group.top + (row - group.first) * TASK_ROW;
  return undefined;
}

// The task rows [first, last) the screen shows from `scrollTop`, with a margin: over every task
// group on the screen (rows between two of them, in a group closed in between, come too).
export function visibleTaskRows(layout: Layout, taskRows: number, scrollTop: number, screenHeight: number): [number, number] {
  const margin = 20;
  let first = Infinity, last = -Infinity;
  for (const group of layout.taskGroups) {
    const from = Math.max(group.first, group.first + Math.floor((scrollTop - group.top) / TASK_ROW) - margin);
    const to = Math.min(group.last, group.first + Math.ceil((scrollTop + screenHeight - group.top) / TASK_ROW) + margin);
    if (from >= to) continue;
    first = Math.min(first, from);
    last = Math.max(last, to);
  }
  if (first >= last) return [0, 0];
  const clamp = (row: number) => Math.max(0, Math.min(row, taskRows));
  return [clamp(first), clamp(last)];
}
