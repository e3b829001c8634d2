// Tooltips on hover: what is under the pointer, from what the page already holds (the window's
// answer), so moving the mouse never asks the server anything. The drawing code registers each
// drawn item's place with a function that describes it; the description is built only when the
// pointer is over the item.
import { publishTip } from './test_hooks';
import { formatDuration, formatNumber, formatTime } from './time_format';
import { drawnAt } from './hit_test';

export interface Tip {
  kind: string;   // span, block, run, run-block, task, arrow, message, counter, idle, off-cpu, frame
  title: string;
  rows: [string, string][];
}

type Describe = (time: number) => Tip;

const SEGMENT_REACH = 4;  // px from an arrow's line that count as on it

type Box = [number, number, number, number, Describe, number];  // x0, x1, y0, y1, describe, slop

export class HoverTargets {
  private rects: Box[] = [];
  private segments: [number, number, number, number, Describe][] = [];
  private areas: Box[] = [];

  clear() { this.rects = []; this.segments = []; this.areas = []; }
  // `slop`: pixels added on each side to what is drawn, to reach a thin item.
  rect(x0: number, x1: number, y0: number, y1: number, describe: Describe, slop = 0) { this.rects.push([x0, x1, y0, y1, describe, slop]); }
  segment(x0: number, y0: number, x1: number, y1: number, describe: Describe) { this.segments.push([x0, y0, x1, y1, describe]); }
  // A box that yields to arrows: a task's row around its thin line, which arrows cross.
  area(x0: number, x1: number, y0: number, y1: number, describe: Describe) { this.areas.push([x0, x1, y0, y1, describe, 0]); }

  // An item drawn at the point: of the boxes, the one the pointer is on (hit_test.ts: drawn under
  // it, else whose slop reaches it: tasks by time sit side by side), else the nearest arrow, else
  // an area (as a click takes them: main.ts's mouseup).
  find(x: number, y: number, time: number): Tip | null {
    const inside = (boxes: Box[]) => drawnAt(boxes, x, y, box => box[5])?.box[4] ?? null;
    let best: Describe | null = inside(this.rects), bestDistance = SEGMENT_REACH;
    if (best) return best(time);
    for (const [x0, y0, x1, y1, describe] of this.segments) {
      const distance = distanceToSegment(x, y, x0, y0, x1, y1);
      if (distance <= bestDistance) { best = describe; bestDistance = distance; }
    }
    best ??= inside(this.areas);
    return best ? best(time) : null;
  }
}

function distanceToSegment(x: number, y: number, x0: number, y0: number, x1: number, y1: number) {
  const dx = x1 - x0, dy = y1 - y0, length2 = dx * dx + dy * dy;
  const t = length2 === 0 ? 0 : Math.max(0, Math.min(1, ((x - x0) * dx + (y - y0) * dy) / length2));
  return Math.hypot(x - (x0 + t * dx), y - (y0 + t * dy));
}

let element: HTMLDivElement | null = null;
function tooltipElement() {
  if (element) return element;
  element = document.createElement('div');
  element.id = 'tooltip';
  element.hidden = true;
  Object.assign(element.style, {
    position: 'fixed', zIndex: '20', pointerEvents: 'none', maxWidth: '420px', padding: '4px 7px',
    background: 'rgba(30, 32, 36, 0.94)', color: '#f4f4f4', font: '11px system-ui, sans-serif', borderRadius: '3px',
    boxShadow: '0 1px 4px rgba(0,0,0,0.3)', whiteSpace: 'nowrap',
  });
  document.body.appendChild(element);
  return element;
}

function escapeText(text: string) {
  return text.replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]!));
}

export function showTip(tip: Tip, clientX: number, clientY: number) {
  const box = tooltipElement();
  publishTip(box, tip.kind, tip.title);
  box.innerHTML = `<b>${escapeText(tip.title)}</b>` +
    tip.rows.map(([k, v]) => `<br><span style="color:#aab">${escapeText(k)}</span> ${escapeText(v)}`).join('');
  box.hidden = false;
  // Beside the pointer, kept inside the window.
  const width = box.offsetWidth, height = box.offsetHeight;
  const left = clientX + 14 + width > window.innerWidth ? clientX - 14 - width : clientX + 14;
  const top = clientY + 16 + height > window.innerHeight ? clientY - 10 - height : clientY + 16;
  box.style.left = `${Math.max(0, left)}px`;
  box.style.top = `${Math.max(0, top)}px`;
}

export function hideTip() {
  if (element) { element.hidden = true; publishTip(element, null); }
}

// ---- descriptions of what the timeline draws ----

const STATES = ['ok', 'failed', 'cancelled', 'unresolved'];

export function spanTip(name: string, begin: number, end: number, depth: number, thread: string): Tip {
  // What is drawn is a piece: a task's span has one per run (its details give its wall time).
  return { kind: 'span', title: name, rows: [['duration (this piece)', formatDuration(end - begin)], ['begin', formatTime(begin)], ['thread', thread], ['depth', String(depth)]] };
}

export function spanBlockTip(begin: number, end: number, count: number, depth: number): Tip {
  return { kind: 'block', title: `${count.toLocaleString()} ${count === 1 ? 'span' : 'spans'} merged`,
           rows: [['from', formatTime(begin)], ['for', formatDuration(end - begin)], ['depth', String(depth)], ['', 'zoom in to see them apart']] };
}

// A thread off its CPU (recorded with --sched): state 1 runnable (preempted), 2 blocked, -1 merged.
export function offCpuTip(begin: number, end: number, count: number, state: number): Tip {
  const what = state === 2 ? 'blocked (waiting for something: sleep, I/O, a lock)'
    : state === 1 ? 'runnable, waiting for a CPU (preempted)' : 'off CPU, blocked and waiting for a CPU';
  return { kind: 'off-cpu', title: count > 1 ? `${what}, ${count} stretches merged` : what,
           rows: [['from', formatTime(begin)], ['for', formatDuration(end - begin)]] };
}

// Events a thread could not write between two of its packets (counted as discarded).
export function lostTip(begin: number, end: number, count: number): Tip {
  return { kind: 'lost', title: `${formatNumber(count)} ${count === 1 ? 'event' : 'events'} lost`,
           rows: [...(end > begin ? [['between', formatTime(begin)], ['and', formatTime(end)]] : [['at', formatTime(begin)]]) as [string, string][],
                  ['why', 'the thread\'s ring had no room for them (its collector behind)']] };
}

// Stack samples on a lane: `count` of them from `first` to `last`.
export function samplesTip(first: number, last: number, count: number): Tip {
  return { kind: 'samples', title: count > 1 ? `${count.toLocaleString()} stack samples` : 'a stack sample',
           rows: count > 1 ? [['from', formatTime(first)], ['to', formatTime(last)], ['flame graph', 'shift+drag, then "samples"']]
             : [['at', formatTime(first)], ['flame graph', 'shift+drag, then "samples"']] };
}

export function idleTip(begin: number, end: number, count: number): Tip {
  return { kind: 'idle', title: count > 1 ? `idle (${count} periods merged)` : 'idle (loop suspended)',
           rows: [['from', formatTime(begin)], ['for', formatDuration(end - begin)]] };
}

// A task's line in the tasks group; `run`: the part of it under the pointer where it ran (runs
// less than a pixel apart are drawn, and told, as one).
export function taskTip(name: string, kind: string, begin: number, end: number, state: number, descendants: number, run?: [number, number]): Tip {
  const rows: [string, string][] = [['kind', kind], ['outcome', STATES[state] ?? '?'], ['created', formatTime(begin)], ['lasted', formatDuration(end - begin)]];
  if (descendants > 0) rows.push(['subtree', `${descendants.toLocaleString()} ${descendants === 1 ? 'task' : 'tasks'}`]);
  if (run) rows.push(['running', `${formatTime(run[0])} for ${formatDuration(run[1] - run[0])}`]);
  return { kind: 'task', title: name || 'task', rows };
}

// Tasks by time too narrow to tell apart, merged on their row.
export function taskBlockTip(begin: number, end: number, count: number, failed: number, cancelled: number): Tip {
  const rows: [string, string][] = [['from', formatTime(begin)], ['for', formatDuration(end - begin)]];
  if (failed > 0) rows.push(['failed', formatNumber(failed)]);
  if (cancelled > 0) rows.push(['cancelled', formatNumber(cancelled)]);
  rows.push(['', 'click (or zoom in) to see them apart']);
  return { kind: 'task-block', title: `${formatNumber(count)} tasks merged`, rows };
}

// A task's run in a thread lane.
export function runTip(name: string, kind: string, begin: number, end: number, thread: string, depth: number): Tip {
  return { kind: 'run', title: name || 'task', rows: [['ran', formatDuration(end - begin)], ['from', formatTime(begin)], ['task kind', kind],
                                                      ['thread', thread], ...(depth > 0 ? [['inside', `${depth} other ${depth === 1 ? 'run' : 'runs'}`] as [string, string]] : [])] };
}

export function runBlockTip(begin: number, end: number, count: number, depth: number): Tip {
  return { kind: 'run-block', title: `${count.toLocaleString()} task ${count === 1 ? 'run' : 'runs'} merged`,
           rows: [['from', formatTime(begin)], ['for', formatDuration(end - begin)], ['depth', String(depth)], ['', 'zoom in to see them apart']] };
}

const ARROW_VERBS = ['waits on', 'resolved', 'created'];

export function arrowTip(kind: number, from: string, to: string, fromTime: number, toTime: number, merged: number): Tip {
  const times: [string, string][] = kind === 2 ? [['at', formatTime(fromTime)]]
    : [['at', formatTime(fromTime)], ['to', formatTime(toTime)], ['after', formatDuration(toTime - fromTime)]];
  return { kind: 'arrow', title: `${from} ${ARROW_VERBS[kind] ?? '→'} ${to}`,
           rows: [...times, ...(merged > 1 ? [['merged', `${merged} arrows drawn here`] as [string, string]] : [])] };
}

export function messageTip(from: string, to: string, sent: number, received: number, merged: number): Tip {
  return { kind: 'message', title: `message ${from} → ${to}`,
           rows: [['sent', formatTime(sent)], ['received', formatTime(received)], ['in flight', formatDuration(received - sent)],
                  ...(merged > 1 ? [['merged', `${merged} messages drawn here`] as [string, string]] : [])] };
}

// The value of a counter at `time`: the last point at or before it ([time, min, max, last]); a
// downsampled point covers a pixel column, and its range is shown with it.
export function counterTip(name: string, points: [number, number, number, number][], time: number): Tip {
  let low = 0, high = points.length;
  while (low < high) { const mid = (low + high) >> 1; if (points[mid][0] <= time) low = mid + 1; else high = mid; }
  const point = points[low - 1];
  if (!point) return { kind: 'counter', title: name, rows: [['at', formatTime(time)], ['value', 'no sample yet']] };
  const rows: [string, string][] = [['at', formatTime(time)], ['value', formatNumber(point[3])]];
  if (point[1] !== point[2]) rows.push(['range here', `${formatNumber(point[1])} … ${formatNumber(point[2])}`]);
  return { kind: 'counter', title: name, rows };
}
