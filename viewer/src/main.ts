// The chronicle viewer: a canvas timeline of one trace, or of several processes' traces on one
// timeline (their lanes under a header per process, arrows for the messages between them). It keeps only the window it shows, as
// the server aggregated it for the canvas's width, and asks again after every pan or zoom.
import { ArrowTuple, Backend, LaneInfo, CounterBreakdown, HttpBackend, RangeStats, SearchHit, SpanDetails, Summary, TaskDetails, TaskRef, WindowAnswer } from './api';
import { EmbeddedTrace, LocalBackend } from './local';
import { FlamePane } from './flame';
import * as tips from './tooltip';
import { drawnAt } from './hit_test';
import { formatDuration, formatNumber, formatTime } from './time_format';
import { readUrlState, writeUrlState } from './url_state';
import * as hooks from './test_hooks';
import { CollapsedTask, ShownRows } from './task_rows';
import { arrowAt, drawTaskRows, STATE_COLOURS, TaskHits } from './tasks_view';
import {
  computeLayout, COUNTER_TRACK, defaultCollapsed, Header, Layout, LANE_HEADER, moveSection, RULER_HEIGHT, SectionKind, SPAN_ROW, TASK_ROW, TaskOrder, taskRowY, TrackState,
  visibleTaskRows,
} from './tracks';

const KIND_COLOURS = ['#9aa5b1', '#5b8def', '#c58af9', '#4fb8a8', '#e7b416', '#ef8354'];  // unknown, coroutine, promise, handler, timer, io
const MESSAGE_COLOUR = '#d2691e';
const BLOCK_COLOUR = '#8c99a8';
// A thread off its CPU (record --sched), along the foot of its lane.
const OFF_CPU_STRIP = 3;
const OFF_CPU_BLOCKED = '#6b6b6b';
const OFF_CPU_RUNNABLE = '#e8a33d';
const OFF_CPU_MERGED = '#a98a5c';
const SAMPLE_TICK = 3;  // px: the samples' ticks at the foot of a lane's header
const SAMPLE_COLOUR = '#7a2e8f';
const LOST_COLOUR = '#d62020';
const LOST_MARK_MIN = 3;  // px
const MIN_ZOOM_NS = 100;

interface View { begin: number; end: number }
type Selection = { kind: 'task'; index: number } | { kind: 'span'; lane: number; depth: number; index: number } | { kind: 'counter'; index: number } | null;


const canvas = document.getElementById('timeline') as HTMLCanvasElement;
const scroller = document.getElementById('scroller') as HTMLDivElement;
const spacer = document.getElementById('spacer') as HTMLDivElement;
const panel = document.getElementById('panel') as HTMLDivElement;
// What the panel says with nothing selected: how to select, and what the colours mean.
const panelHint = panel.innerHTML + legendHtml();
panel.innerHTML = panelHint;
const statusText = document.getElementById('status') as HTMLSpanElement;
const searchBox = document.getElementById('search') as HTMLInputElement;
const onlyMatches = document.getElementById('only-matches') as HTMLInputElement;
const context = canvas.getContext('2d')!;

const embedded = (window as unknown as { CHRONICLE_DATA?: EmbeddedTrace }).CHRONICLE_DATA;
const backend: Backend = embedded ? new LocalBackend(embedded) : new HttpBackend();

let summary: Summary;
let layout: Layout;
let view: View = { begin: 0, end: 1 };
let data: WindowAnswer | null = null;
let selection: Selection = null;
let highlight = '';
let rangeSelection: View | null = null;
let requested = 0;   // the latest window request's number: older answers are dropped
let windowsLoaded = 0;
let linkRestored = false;
const tracks: TrackState = { collapsed: new Set(), order: new Map(), pins: new Map() };
const collapsedTasks = new Map<number, CollapsedTask>();  // by task index (the tree order's)
let taskOrder: TaskOrder = 'time';
let taskRowCount = 0;            // task rows: by time, or in the tree once the collapsed subtrees are out
let askedRows: [number, number] = [0, 0];  // the task rows the last request asked for
let critical = new Set<number>();  // the selected task's critical path
let taskHits: TaskHits = { lines: [], blocks: [], solid: [], toggles: [], arrows: [] };
// Header controls drawn on the canvas: [x0, x1, y0, y1, what a click does].
let controls: [number, number, number, number, () => void][] = [];
const switchPoints = new Map<string, [number, number]>();  // a tasks header's key -> its switch, as drawn
const pinPoints = new Map<string, [number, number]>();     // a header's key -> its pin link, as drawn

function colourOf(name: string): string {
  let hash = 2166136261;
  for (let k = 0; k < name.length; ++k) hash = Math.imul(hash ^ name.charCodeAt(k), 16777619);
  return `hsl(${(hash >>> 0) % 360}, 55%, 62%)`;
}

// "server (4212) · 6,426 task runs · 0 spans": what a lane holds, runs included.
function laneLabel(info: LaneInfo) {
  const runs = info.runs ? ` · ${formatNumber(info.runs)} task ${info.runs === 1 ? 'run' : 'runs'}` : '';
  return `${info.name} (${info.thread_id})${runs} · ${formatNumber(info.spans)} ${info.spans === 1 ? 'span' : 'spans'}`;
}

// The colours the timeline uses, by what they mean (the same constants draw them).
function legendHtml() {
  const swatch = (colour: string, text: string) =>
    `<span class="legend-item"><span class="swatch" style="background:${colour}"></span>${escapeHtml(text)}</span>`;
  const kinds = ['unknown', 'coroutine', 'promise', 'handler', 'timer', 'io'];
  return '<div id="legend"><h3>Colours</h3>' +
    `<p>Task runs, by the task's kind: ${kinds.map((kind, k) => swatch(KIND_COLOURS[k], kind)).join(' ')}</p>` +
    `<p>Task lines, by outcome: ${['ok', 'failed', 'cancelled', 'unresolved'].map((state, k) => swatch(STATE_COLOURS[k], state)).join(' ')}</p>` +
    `<p>A thread off its CPU (the strip at a lane's foot): ${swatch(OFF_CPU_BLOCKED, 'blocked')} ${swatch(OFF_CPU_RUNNABLE, 'waiting for a CPU')} ${swatch(OFF_CPU_MERGED, 'both, merged')}</p>` +
    `<p>${swatch(LOST_COLOUR, 'events lost (on the lane\'s header: hover for how many)')} ${swatch(BLOCK_COLOUR, 'busy: spans or runs too small to tell apart')} ${swatch('rgba(120, 150, 200, 0.35)', 'idle: the event loop waiting')} ${swatch(SAMPLE_COLOUR, 'a stack sample')} ${swatch(MESSAGE_COLOUR, 'a message between processes')}</p>` +
    '<p>Spans are coloured by their name.</p></div>';
}

function width() { return canvas.clientWidth; }
function xOf(time: number) { return ((time - view.begin) / (view.end - view.begin)) * width(); }
function timeAt(x: number) { return view.begin + (x / width()) * (view.end - view.begin); }

function relayout() {
  const shown = shownRows();
  layout = computeLayout(summary, tracks, taskRowCount,
                         process => taskOrder === 'time' ? process.firstTimeRow : shown.shownRow(process.firstTask), taskOrder);
  resize();
}

function shownRows() { return new ShownRows(summary.task_rows, collapsedTasks.values()); }
function countTaskRows() { taskRowCount = taskOrder === 'time' ? summary.time_rows ?? 0 : shownRows().count; }
// The row a task is shown on; null when it is in a collapsed subtree.
function taskRowOf(task: TaskRef): number | null {
  if (taskOrder === 'time') return task.time_row ?? null;
  return shownRows().isHidden(task.row) ? null : shownRows().shownRow(task.row);
}
// Tasks by time, or as the tree (where subtrees collapse): the rows change, the window stays.
function setTaskOrder(order: TaskOrder) {
  if (order === taskOrder) return;
  taskOrder = order;
  countTaskRows();
  relayout();
  scrollToOffset(0);
}
// The top of a shown task row, in its process's tasks group (0 when the group is closed).
function taskY(row: number) { return taskRowY(layout, row) ?? 0; }

// The thread lanes stay on screen while the rest scrolls under them, when they come first (an
// open threads group; every process's in a merged trace) and take at most this share of it.
const PIN_SHARE = 0.45;
// Where the pinned lanes end on the canvas (RULER_HEIGHT: nothing pinned). Page y above it shows
// the layout as it is; below, the layout scrolled by `offset`.
function pinnedEnd() {
  const end = layout.lanesEnd;
  return end > RULER_HEIGHT && end - RULER_HEIGHT <= PIN_SHARE * scroller.clientHeight ? end : RULER_HEIGHT;
}

// The scrolling is the viewer's own: `offset`, the layout pixels scrolled past, is the truth, and
// the scroller's scrollbar only shows it and moves it. Its spacer is at most SPACER_CAP tall
// (Chromium caps an element's height near 33.5 M px, and a layout of 2.4 M task rows is taller),
// so a scrollbar pixel is `scrollScale()` layout pixels; the page's own moves (shift+wheel, going
// to a task) set the offset exactly.
const SPACER_CAP = 16_000_000;
let offset = 0;
function maxOffset() { return Math.max(0, layout.height - Math.min(scroller.clientHeight, layout.height)); }
function scrollScale() { return maxOffset() > SPACER_CAP ? maxOffset() / SPACER_CAP : 1; }
function scrollToOffset(y: number) {
  offset = Math.max(0, Math.min(y, maxOffset()));
  showOffset();
  followScroll();
}
// The scrollbar put where the offset is (its scroll event then finds the two in step).
function showOffset() {
  const top = offset / scrollScale();
  if (Math.abs(scroller.scrollTop - top) >= 1) scroller.scrollTop = top;
}
// The offset, after the scrollbar moved by the user (out of step with it): read at every use, so
// that a scroll is seen before its scroll event comes.
function currentOffset() {
  const top = offset / scrollScale();
  if (Math.abs(scroller.scrollTop - top) >= 1) offset = Math.min(scroller.scrollTop * scrollScale(), maxOffset());
  return offset;
}
// Asks for the task rows that come into view (the server answers only those).
function followScroll() {
  if (rowsFarApart(rowsOnScreen(), askedRows)) requestWindow(); else draw();
}
// Rows asked for with a margin of 20: within 10 of them, the answer still covers the screen.
function rowsFarApart(a: [number, number], b: [number, number]) { return Math.abs(a[0] - b[0]) > 10 || Math.abs(a[1] - b[1]) > 10; }
function toLayoutY(canvasY: number) { return canvasY < pinnedEnd() ? canvasY : canvasY + currentOffset(); }
function toCanvasY(layoutY: number) { return layoutY < pinnedEnd() ? layoutY : layoutY - currentOffset(); }
// Whether a layout y of the scrolled part lies under the pinned lanes (hidden there).
function underPinned(layoutY: number) { return layoutY >= pinnedEnd() && toCanvasY(layoutY) < pinnedEnd(); }
// The task rows the screen shows: those of the scrolled part, below the pinned lanes.
function rowsOnScreen() {
  const pinned = pinnedEnd();
  return visibleTaskRows(layout, taskRowCount, currentOffset() + pinned, scroller.clientHeight - pinned);
}

function resize() {
  const ratio = window.devicePixelRatio || 1;
  const cssWidth = scroller.clientWidth;
  const cssHeight = Math.min(scroller.clientHeight, layout.height);
  canvas.style.width = `${cssWidth}px`;
  canvas.style.height = `${cssHeight}px`;
  canvas.width = Math.round(cssWidth * ratio);
  canvas.height = Math.round(cssHeight * ratio);
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  spacer.style.height = `${Math.min(Math.max(0, layout.height - cssHeight), SPACER_CAP)}px`;
  offset = Math.min(offset, maxOffset());
  showOffset();
  requestWindow();
}

// Frames are drawn from the last answer at the current view (so panning moves at once), and a
// fresh answer is asked for; only the newest answer is kept.
let frameQueued = false;
function draw() {
  if (frameQueued) return;
  frameQueued = true;
  requestAnimationFrame(() => { frameQueued = false; render(); });
}

let fetchTimer: number | undefined;
function requestWindow() {
  draw();
  clearTimeout(fetchTimer);
  const number = ++requested;
  hooks.publishSettled(false);
  fetchTimer = window.setTimeout(async () => {
    const asked = performance.now();
    const rows = rowsOnScreen();
    const answer = await backend.window(view.begin, view.end, width(),
      { first: rows[0], last: rows[1], collapsed: taskOrder === 'tree' ? [...collapsedTasks.keys()] : [], by: taskOrder }, highlight || undefined);
    if (number !== requested) return;
    hooks.publishFetchTime(performance.now() - asked);
    data = answer;
    askedRows = rows;
    if ((answer.tasks.rows ?? taskRowCount) !== taskRowCount) {
      // Rows came or went (a subtree collapsed or opened): what is below moves.
      taskRowCount = answer.tasks.rows ?? taskRowCount;
      relayout();
      return;
    }
    // Scrolled away while it was asked for (a scroll compares with the rows answered last):
    // the rows on screen now are asked for.
    if (rowsFarApart(rowsOnScreen(), rows)) { requestWindow(); return; }
    ++windowsLoaded;
    hooks.publishSettled(true);
    draw();
  }, 16);
}

function setView(begin: number, end: number) {
  const span = Math.max(end - begin, MIN_ZOOM_NS);
  const maxSpan = summary.duration * 1.2 + MIN_ZOOM_NS;
  const clamped = Math.min(span, maxSpan);
  let start = begin + (end - begin - clamped) / 2;
  start = Math.max(-summary.duration * 0.1, Math.min(start, summary.duration * 1.1 - clamped));
  view = { begin: start, end: start + clamped };
  requestWindow();
}

function zoomAround(x: number, factor: number) {
  const anchor = timeAt(x);
  setView(anchor - (anchor - view.begin) * factor, anchor + (view.end - anchor) * factor);
}

function pan(ns: number) { setView(view.begin + ns, view.end + ns); }

// ---- drawing ----

let counts: hooks.DrawCounts = hooks.noCounts();
let laneLabels: string[] = [];  // the lane headers drawn, as the page published them
let defaultGroups: string[] = [];  // the groups collapsed when the trace opens (tracks.defaultCollapsed)
// Where things were drawn, for clicks: [x0, x1, y0, y1, selection].
let hitBoxes: [number, number, number, number, Selection, 'run'?][] = [];
// What is drawn where, for tooltips (tooltip.ts): described from the answer, on hover only.
const hover = new tips.HoverTargets();

function drawLabel(text: string, x0: number, x1: number, y: number, height: number): boolean {
  const left = Math.max(x0, 0) + 3;
  const room = Math.min(x1, width()) - left - 2;
  if (room < 12) return false;
  let shown = text;
  if (context.measureText(shown).width > room) {
    // Cut to what fits, with an ellipsis; nothing when not even 3 characters fit.
    const perChar = context.measureText(shown).width / shown.length;
    const keep = Math.floor(room / perChar) - 1;
    if (keep < 3) return false;
    shown = shown.slice(0, keep) + '…';
  }
  context.fillText(shown, left, y + height / 2 + 1);
  counts.labels++;
  return true;
}

function matches(name: string | undefined) { return highlight !== '' && !!name && name.toLowerCase().includes(highlight); }
// "Only matches": what the search text does not match is drawn faint (spans, runs and the busy
// blocks, which may hide matches, in the thread lanes).
function filtering() { return highlight !== '' && onlyMatches.checked; }
const FILTERED_OUT_ALPHA = 0.2;

function render() {
  const renderStarted = performance.now();
  const top = currentOffset();
  const w = width(), h = canvas.clientHeight;
  context.clearRect(0, 0, w, h);
  context.font = '11px system-ui, sans-serif';
  context.textBaseline = 'middle';
  counts = hooks.noCounts();
  laneLabels = [];
  hitBoxes = [];
  hover.clear();
  controls = [];
  switchPoints.clear();
  pinPoints.clear();
  taskHits = { lines: [], blocks: [], solid: [], toggles: [], arrows: [] };
  // The scrolled part, below the pinned lanes (or the ruler); then the pinned lanes, their headers
  // and the messages between them, unscrolled.
  const pinned = pinnedEnd();
  context.save();
  context.beginPath();
  context.rect(0, pinned, w, Math.max(h - pinned, 0));
  context.clip();
  context.translate(0, -top);
  if (data) {
    drawHeaders(header => pinned === RULER_HEIGHT || header.top >= pinned);
    if (pinned === RULER_HEIGHT) {
      drawLanes(data);
      drawMessages(data);
    }
    drawCounters(data);
    drawTasks(data);
  }
  context.restore();
  if (data && pinned > RULER_HEIGHT) {
    context.save();
    context.beginPath();
    context.rect(0, 0, w, pinned);
    context.clip();
    drawHeaders(header => header.top < pinned);
    drawLanes(data);
    drawMessages(data);
    context.restore();
    if (top > 0) {  // the scrolled part goes under them
      context.fillStyle = 'rgba(0, 0, 0, 0.25)';
      context.fillRect(0, pinned - 1, w, 2);
    }
  }
  drawRangeSelection(h);
  drawRuler();
  publishState();
  hooks.publishRenderTime(performance.now() - renderStarted);
}

function kindName(kind: number) { return summary.task_kinds?.[kind] ?? String(kind); }

function drawLanes(answer: WindowAnswer) {
  counts.laneRuns = summary.lanes.map(() => 0);
  for (const lane of answer.lanes) {
    const info = summary.lanes[lane.lane];
    const y0 = layout.laneTop[lane.lane];
    if (y0 === undefined) continue;  // its group is collapsed
    const bodyTop = y0 + LANE_HEADER;
    const runDepths = info.run_depths ?? 0;
    const bodyHeight = (runDepths + Math.max(info.depths, 1)) * SPAN_ROW;
    const spansTop = bodyTop + runDepths * SPAN_ROW;
    counts.lanes++;
    context.fillStyle = '#eef0f3';
    context.fillRect(0, y0, width(), LANE_HEADER);
    context.fillStyle = '#333';
    const label = laneLabel(info);
    context.fillText(label, 4, y0 + LANE_HEADER / 2);
    laneLabels.push(label);
    // Where the thread lost events: a red mark across its header, as wide as the gap between the
    // packets that counted them (at least a few pixels).
    for (const [b, e, count] of info.lost ?? []) {
      if (e < view.begin || b > view.end) continue;
      const x0 = Math.max(xOf(b), 0), x1 = Math.min(Math.max(xOf(e), x0 + LOST_MARK_MIN), width());
      context.fillStyle = LOST_COLOUR;
      context.fillRect(x0, y0 + LANE_HEADER - 4, x1 - x0, 4);
      context.beginPath();
      context.moveTo(x0, y0);
      context.lineTo(x0 + 6, y0);
      context.lineTo(x0 + 3, y0 + 6);
      context.fill();
      hover.rect(x0 - 2, Math.max(x1, x0 + 6) + 2, y0, y0 + LANE_HEADER, () => tips.lostTip(b, e, count));
      counts.lost += count;
      counts.lostMarks++;
    }
    // Idle (the loop suspended): shaded behind the runs and spans.
    context.fillStyle = 'rgba(120, 150, 200, 0.18)';
    for (const [b, e, count] of lane.idle) {
      context.fillRect(xOf(b), bodyTop, Math.max(xOf(e) - xOf(b), 1), bodyHeight);
      hover.rect(xOf(b), Math.max(xOf(e), xOf(b) + 1), bodyTop, bodyTop + bodyHeight, () => tips.idleTip(b, e, count));
    }
    // When the thread was off its CPU (--sched): a strip along the lane's foot, grey blocked,
    // orange waiting for a CPU.
    for (const [b, e, count, state] of lane.off_cpu ?? []) {
      const x0 = xOf(b), x1 = Math.max(xOf(e), x0 + 1);
      context.fillStyle = state === 2 ? OFF_CPU_BLOCKED : state === 1 ? OFF_CPU_RUNNABLE : OFF_CPU_MERGED;
      context.fillRect(x0, bodyTop + bodyHeight - OFF_CPU_STRIP, x1 - x0, OFF_CPU_STRIP);
      hover.rect(x0, x1, bodyTop + bodyHeight - OFF_CPU_STRIP, bodyTop + bodyHeight, () => tips.offCpuTip(b, e, count, state));
      counts.offCpu++;
    }
    // The stack samples (--sample): a tick each along the foot of the lane's header, clear of the
    // spans, merged within a pixel.
    context.fillStyle = SAMPLE_COLOUR;
    for (const [first, last, count] of lane.samples ?? []) {
      const x0 = xOf(first), x1 = Math.max(xOf(last), x0 + 1);
      context.fillRect(x0, bodyTop - SAMPLE_TICK, x1 - x0, SAMPLE_TICK);
      hover.rect(x0 - 1, x1 + 1, bodyTop - SAMPLE_TICK, bodyTop, () => tips.samplesTip(first, last, count));
      counts.samples += count;
    }
    // What ran: the task runs, coloured by the task's kind, with the spans under them.
    context.fillStyle = BLOCK_COLOUR;
    for (const [b, e, depth, count] of lane.run_blocks ?? []) {
      const x0 = xOf(b), x1 = Math.max(xOf(e), x0 + 1);
      context.fillRect(x0, bodyTop + depth * SPAN_ROW + 1, x1 - x0, SPAN_ROW - 2);
      hover.rect(x0, x1, bodyTop + depth * SPAN_ROW + 1, bodyTop + (depth + 1) * SPAN_ROW - 1, () => tips.runBlockTip(b, e, count, depth));
      counts.laneRuns[lane.lane] += count;
    }
    for (const [b, e, depth, task, kind] of lane.runs ?? []) {
      const name = answer.tasks.names[task] ?? '';
      const x0 = xOf(b), x1 = Math.max(xOf(e), x0 + 1);
      const y = bodyTop + depth * SPAN_ROW + 1;
      const isSelected = selection?.kind === 'task' && selection.index === task;
      context.globalAlpha = filtering() && !isSelected && !matches(name) ? FILTERED_OUT_ALPHA : 1;
      context.fillStyle = KIND_COLOURS[kind] ?? KIND_COLOURS[0];
      context.fillRect(x0, y, x1 - x0, SPAN_ROW - 2);
      if (isSelected || matches(name)) {
        context.strokeStyle = isSelected ? '#000' : '#f0c000';
        context.lineWidth = 2;
        context.strokeRect(x0 + 1, y + 1, x1 - x0 - 2, SPAN_ROW - 4);
      }
      context.fillStyle = '#111';
      drawLabel(`${name} · ${kindName(kind)}`, x0, x1, y, SPAN_ROW - 2);
      context.globalAlpha = 1;
      hitBoxes.push([x0, x1, y, y + SPAN_ROW - 2, { kind: 'task', index: task }, 'run']);
      hover.rect(x0, x1, y, y + SPAN_ROW - 2, () => tips.runTip(name, kindName(kind), b, e, `${info.name} (${info.thread_id})`, depth));
      counts.laneRuns[lane.lane]++;
      counts.runs++;
    }
    context.fillStyle = BLOCK_COLOUR;
    context.globalAlpha = filtering() ? FILTERED_OUT_ALPHA : 1;
    for (const [b, e, depth, count] of lane.blocks) {
      const x0 = xOf(b), x1 = Math.max(xOf(e), x0 + 1);
      context.fillRect(x0, spansTop + depth * SPAN_ROW + 1, x1 - x0, SPAN_ROW - 2);
      hover.rect(x0, x1, spansTop + depth * SPAN_ROW + 1, spansTop + (depth + 1) * SPAN_ROW - 1, () => tips.spanBlockTip(b, e, count, depth));
      counts.blocks += count;
    }
    context.globalAlpha = 1;
    for (const [b, e, depth, index, site, byAttribute] of lane.spans) {
      const name = answer.names[site] ?? '?';
      const x0 = xOf(b), x1 = Math.max(xOf(e), x0 + 1);
      const y = spansTop + depth * SPAN_ROW + 1;
      const isSelected = selection?.kind === 'span' && selection.lane === lane.lane && selection.depth === depth && selection.index === index;
      const matched = matches(name) || byAttribute === 1;
      if (matched) counts.spansMatched++;
      context.globalAlpha = filtering() && !matched && !isSelected ? FILTERED_OUT_ALPHA : 1;
      if (context.globalAlpha < 1) counts.spansFilteredOut++;
      context.fillStyle = colourOf(name);
      context.fillRect(x0, y, x1 - x0, SPAN_ROW - 2);
      if (matched || isSelected) {
        context.strokeStyle = isSelected ? '#000' : '#f0c000';
        context.lineWidth = 2;
        context.strokeRect(x0 + 1, y + 1, x1 - x0 - 2, SPAN_ROW - 4);
      }
      context.fillStyle = '#111';
      drawLabel(name, x0, x1, y, SPAN_ROW - 2);
      context.globalAlpha = 1;
      hitBoxes.push([x0, x1, y, y + SPAN_ROW - 2, { kind: 'span', lane: lane.lane, depth, index }]);
      hover.rect(x0, x1, y, y + SPAN_ROW - 2, () => tips.spanTip(name, b, e, depth, `${info.name} (${info.thread_id})`));
      counts.spans++;
    }
  }
}

// Group headers: a click on one collapses or opens it; ▲ ▼ move a group among its process's.
function drawHeaders(which: (header: Header) => boolean) {
  for (const header of layout.headers) {
    if (!which(header)) continue;
    const y = header.top, w = width();
    context.fillStyle = header.level === 0 ? '#c9d1dc' : '#dde3ea';
    context.fillRect(0, y, w, LANE_HEADER);
    context.fillStyle = '#111';
    context.font = 'bold 11px system-ui, sans-serif';
    context.fillText(`${header.collapsed ? '▸' : '▾'} ${header.label}`, 4 + header.level * 8, y + LANE_HEADER / 2);
    context.font = '11px system-ui, sans-serif';
    const toggle = () => {
      if (tracks.collapsed.has(header.key)) tracks.collapsed.delete(header.key); else tracks.collapsed.add(header.key);
      relayout();
    };
    const [process, section] = header.key.slice('process:'.length).split('/');
    const move = (by: -1 | 1) => () => { moveSection(tracks, Number(process), section as SectionKind, by); relayout(); };
    if (header.down) { context.fillText('▼', w - 18, y + LANE_HEADER / 2); controls.push([w - 22, w - 4, y, y + LANE_HEADER, move(1)]); }
    if (header.up) { context.fillText('▲', w - 36, y + LANE_HEADER / 2); controls.push([w - 40, w - 22, y, y + LANE_HEADER, move(-1)]); }
    // Links at the header's right, right to left: the tasks' switch between by time and as the
    // tree, and pinning the group.
    let right = w - 44;
    const link = (text: string, action: () => void) => {
      const x1 = right, x0 = x1 - context.measureText(text).width - 8;
      context.fillStyle = '#1f5fbf';
      context.fillText(text, x0 + 4, y + LANE_HEADER / 2);
      controls.push([x0, x1, y, y + LANE_HEADER, action]);
      right = x0 - 4;
      return [(x0 + x1) / 2, y + LANE_HEADER / 2] as [number, number];
    };
    if (section === 'tasks')
      switchPoints.set(header.key, link(`⇄ ${taskOrder === 'time' ? 'as a tree' : 'by time'}`, () => setTaskOrder(taskOrder === 'time' ? 'tree' : 'time')));
    if (header.pinnable)
      pinPoints.set(header.key, link(header.pinned ? 'unpin' : 'pin', () => { tracks.pins!.set(header.key, !header.pinned); relayout(); }));
    context.fillStyle = '#111';
    controls.push([0, w - 40, y, y + LANE_HEADER, toggle]);
    counts.headers++;
    if (header.level === 0) counts.groups++;
  }
}

// A message from the sending thread's lane, when sent, to the receiving one's, when received.
function drawMessages(answer: WindowAnswer) {
  context.strokeStyle = context.fillStyle = MESSAGE_COLOUR;
  context.lineWidth = 1;
  context.globalAlpha = 0.8;
  for (const [fromLane, toLane, fromTime, toTime, merged] of answer.messages ?? []) {
    const fromTop = layout.laneTop[fromLane], toTop = layout.laneTop[toLane];
    if (fromTop === undefined || toTop === undefined) continue;
    const x0 = xOf(fromTime), x1 = xOf(toTime);
    const y0 = fromTop + LANE_HEADER / 2, y1 = toTop + LANE_HEADER / 2;
    context.beginPath();
    context.moveTo(x0, y0);
    context.lineTo(x1, y1);
    context.stroke();
    const angle = Math.atan2(y1 - y0, x1 - x0);
    context.beginPath();
    context.moveTo(x1, y1);
    context.lineTo(x1 - 6 * Math.cos(angle - 0.4), y1 - 6 * Math.sin(angle - 0.4));
    context.lineTo(x1 - 6 * Math.cos(angle + 0.4), y1 - 6 * Math.sin(angle + 0.4));
    context.fill();
    const laneName = (lane: number) => summary.lanes[lane]?.name ?? `lane ${lane}`;
    hover.segment(x0, y0, x1, y1, () => tips.messageTip(laneName(fromLane), laneName(toLane), fromTime, toTime, merged));
    counts.messages++;
    counts.messagesShown += merged;
  }
  context.globalAlpha = 1;
}

function drawCounters(answer: WindowAnswer) {
  for (const series of answer.counters) {
    const info = summary.counters[series.counter];
    const y0 = layout.counterTop[series.counter];
    if (y0 === undefined) continue;
    counts.counters++;
    const top = y0 + LANE_HEADER, bottom = top + COUNTER_TRACK;
    context.fillStyle = '#eef0f3';
    context.fillRect(0, y0, width(), LANE_HEADER);
    context.fillStyle = '#333';
    const writers = info.lanes.length > 1 ? `${info.lanes.length} threads` : summary.lanes[info.lane]?.name ?? '';
    context.fillText(`${info.name} (${writers}) · ${formatNumber(info.min)} … ${formatNumber(info.max)}`, 4, y0 + LANE_HEADER / 2);
    hitBoxes.push([0, width(), y0, bottom, { kind: 'counter', index: series.counter }]);
    hover.rect(0, width(), top, bottom, time => tips.counterTip(info.name, series.points, time));
    const range = info.max - info.min || 1;
    const yOf = (value: number) => bottom - ((value - info.min) / range) * (COUNTER_TRACK - 4) - 2;
    const colour = colourOf(info.name);
    context.fillStyle = colour;
    context.strokeStyle = colour;
    context.lineWidth = 1.5;
    context.beginPath();
    let previous: number | null = null;
    for (const [time, low, high, last] of series.points) {
      const x = Math.max(xOf(time), -1);
      if (previous !== null) context.lineTo(x, previous); else context.moveTo(x, yOf(last));
      if (high !== low) context.fillRect(x, yOf(high), 1, Math.max(yOf(low) - yOf(high), 1));
      context.lineTo(x, yOf(last));
      previous = yOf(last);
    }
    if (previous !== null) context.lineTo(width(), previous);
    context.stroke();
  }
}

function drawTasks(whole: WindowAnswer) {
  if (layout.taskGroups.length === 0) return;
  // The rows of a closed group (between two open ones) are left out, and so are their arrows
  // (an arrow joins two tasks of one process).
  const open = (row: number) => taskRowY(layout, row) !== undefined;
  const answer = { ...whole, tasks: { ...whole.tasks, lines: whole.tasks.lines.filter(line => open(line[2])),
                                      blocks: whole.tasks.blocks.filter(block => open(block[2])) },
                   arrows: whole.arrows.filter(arrow => open(arrow[5]) && open(arrow[6])) };
  const drawn = drawTaskRows({
    context, width: width(), xOf, rowY: taskY, selectedTask: selection?.kind === 'task' ? selection.index : null,
    critical, collapsed: new Set(collapsedTasks.keys()), toggles: taskOrder === 'tree', matches, drawLabel, kindName, hover,
  }, answer);
  taskHits = drawn.hits;
  counts.taskLines = drawn.counts.lines;
  counts.taskBlocks = drawn.counts.blocks;
  counts.tasksShown = drawn.counts.lines + drawn.counts.blockTasks;
  counts.taskRuns = drawn.counts.runs;
  counts.taskLabels = drawn.counts.labels;
  counts.toggles = drawn.counts.toggles;
  counts.critical = drawn.counts.critical;
  counts.arrows = drawn.counts.arrows;
  counts.arrowsShown = drawn.counts.arrowsShown;
  counts.createdArrowsShown = drawn.counts.createdArrowsShown;
  counts.arrowsHighlighted = drawn.counts.arrowsHighlighted;
}

function niceStep(rough: number) {
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  for (const multiple of [1, 2, 5, 10]) if (multiple * power >= rough) return multiple * power;
  return 10 * power;
}

function drawRuler() {
  const w = width();
  context.fillStyle = '#f4f5f7';
  context.fillRect(0, 0, w, RULER_HEIGHT);
  context.strokeStyle = '#999';
  context.fillStyle = '#333';
  context.lineWidth = 1;
  // Times are whole nanoseconds: no tick closer than one.
  const step = Math.max(niceStep(((view.end - view.begin) / w) * 100), 1);
  const labels: string[] = [];
  context.beginPath();
  for (let t = Math.ceil(view.begin / step) * step; t <= view.end; t += step) {
    const x = Math.round(xOf(t)) + 0.5;
    context.moveTo(x, RULER_HEIGHT - 8);
    context.lineTo(x, RULER_HEIGHT);
    labels.push(formatTime(t, step));
    context.fillText(labels[labels.length - 1], x + 3, 8);
  }
  context.stroke();
  hooks.publishRulerLabels(labels);
  context.beginPath();
  context.moveTo(0, RULER_HEIGHT - 0.5);
  context.lineTo(w, RULER_HEIGHT - 0.5);
  context.stroke();
}

function drawRangeSelection(height: number) {
  if (!rangeSelection) return;
  const x0 = xOf(Math.min(rangeSelection.begin, rangeSelection.end));
  const x1 = xOf(Math.max(rangeSelection.begin, rangeSelection.end));
  context.fillStyle = 'rgba(255, 200, 0, 0.2)';
  context.fillRect(x0, 0, x1 - x0, height);
  context.strokeStyle = '#c89000';
  context.strokeRect(x0 + 0.5, 0.5, x1 - x0 - 1, height - 1);
}

statusText.textContent = '';
function publishState() {
  hooks.publishDrawCounts(counts);
  hooks.publishLaneLabels(laneLabels);
  hooks.publishTaskRows(taskRowCount, askedRows);
  hooks.publishView(view, data, windowsLoaded);
  // Not before the link the page was opened with is restored: that would write over it.
  if (linkRestored) writeUrlState({ window: view, selection, range: rangeSelection ? orderedRange(rangeSelection) : undefined,
                                    groups: [...tracks.collapsed], defaultGroups, subtrees: [...collapsedTasks.keys()], taskOrder,
                                    pins: [...tracks.pins!].filter(([key, pinned]) => pinned !== key.endsWith('/threads')) });
  const resolution = niceStep(Math.max((view.end - view.begin) / 1000, 1));
  statusText.textContent = `${formatTime(view.begin, resolution)} … ${formatTime(view.end, resolution)} (${formatDuration(view.end - view.begin)} shown)`;
}

function orderedRange(range: View): View {
  return { begin: Math.max(0, Math.min(range.begin, range.end)), end: Math.max(range.begin, range.end) };
}

// ---- the details panel ----

function escapeHtml(text: unknown) {
  return String(text).replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]!));
}
function rows(entries: [string, unknown][]) {
  return `<table>${entries.map(([k, v]) => `<tr><td>${escapeHtml(k)}</td><td>${escapeHtml(v ?? '—')}</td></tr>`).join('')}</table>`;
}
// The server's field names as a reader wants them: "busy_ns" is "busy" with a formatted
// duration, "seen_created" is "seen created" with yes or no.
function readableField([key, value]: [string, unknown]): [string, unknown] {
  const label = key.replace(/_ns$/, '').replace(/_/g, ' ');
  if (key.endsWith('_ns') && typeof value === 'number') return [label, formatDuration(value)];
  if (typeof value === 'boolean') return [label, value ? 'yes' : 'no'];
  return [label, value];
}
// A task of another process than `here`'s is named with its process (ids repeat across them).
function taskLink(ref: TaskRef | null, extra = '', here?: TaskRef) {
  if (!ref) return '—';
  const where = here && ref.process !== here.process ? `${escapeHtml(summary.processes?.[ref.process ?? 0]?.group ?? '')}: ` : '';
  return `${where}<a data-task="${ref.index}">${escapeHtml(ref.id)} ${escapeHtml(ref.display)}</a>${extra}`;
}
function spanLink(ref: { lane: number; depth: number; index: number; name: string; begin: number; end: number } | null) {
  if (!ref) return '—';
  return `<a data-lane="${ref.lane}" data-depth="${ref.depth}" data-span="${ref.index}">${escapeHtml(ref.name)}</a> (${formatDuration(ref.end - ref.begin)})`;
}
function list(items: string[], total?: number) {
  if (items.length === 0) return '<p>none</p>';
  const more = total !== undefined && total > items.length ? `<li>… ${total - items.length} more</li>` : '';
  return `<ul>${items.map(i => `<li>${i}</li>`).join('')}${more}</ul>`;
}

function showTask(details: TaskDetails) {
  hooks.publishPanel(panel, 'task', { task: String(details.index) });
  panel.innerHTML = `<h3 id="details-title">${escapeHtml(details.display)}</h3>` +
    rows([...((summary.processes?.length ?? 1) > 1 ? [['process', details.group ?? '']] as [string, unknown][] : []),
          ['id', details.id], ['kind', details.task_kind], ['name', details.name], ['label', details.label || '—'],
          ['created', details.created === null ? 'before the trace' : formatTime(details.created)],
          ['resolved', details.resolved === null ? 'never' : formatTime(details.resolved)],
          ['duration', formatDuration(details.duration)], ['outcome', details.outcome + (details.outcome_text ? `: ${details.outcome_text}` : '')],
          ['created on', details.thread], ...Object.entries(details.fields).filter(([k]) => k !== 'id' && k !== 'kind').map(readableField)]) +
    (details.attributes && details.attributes.length > 0
      ? `<h3>Attributes</h3>${list(details.attributes.map(escapeHtml))}` : '') +
    `<h3>Runs</h3>${list(details.runs.map(r => `${escapeHtml(r.thread)}: ${formatTime(r.begin)} for ${formatDuration(r.end - r.begin)}${r.ended ? '' : ' (never ended)'}`))}` +
    `<h3>Parent</h3><p>${taskLink(details.parent)}</p>` +
    `<h3>Children</h3>${list(details.children.map(c => taskLink(c)), details.children_count)}` +
    `<h3>Waits on</h3>${list(details.waits_on.map(c => taskLink(c, ` at ${formatTime(c.time ?? 0)}`)))}` +
    `<h3>Waited on by</h3>${list(details.waited_by.map(c => taskLink(c, ` at ${formatTime(c.time ?? 0)}`)))}` +
    `<h3>Resolved by</h3><p>${taskLink(details.resolved_by)}</p>` +
    `<h3>Resolves</h3>${list(details.resolves.map(c => taskLink(c)))}` +
    `<h3>Critical path</h3><p style="color:#777">${escapeHtml(details.critical_path.method)}</p>` +
    list(details.critical_path.steps.map((s) => `${formatDuration(s.contributed)} ` + taskLink(s, '', details) +
      ` <span class="step-state step-${s.state}">${s.state}</span> ${escapeHtml(s.what)}`)) +
    `<h3>Notes</h3>${list(details.notes.map(n => `${formatTime(n.time)} ${escapeHtml(n.type)}: ${escapeHtml(n.text)}`), details.notes_count)}`;
}

function showSpan(details: SpanDetails) {
  hooks.publishPanel(panel, 'span');
  panel.innerHTML = `<h3 id="details-title">${escapeHtml(details.name)}</h3>` +
    rows([['begin', formatTime(details.begin)], ['end', formatTime(details.end)],
          [details.span && details.span.running_ns !== details.duration ? 'this piece (in one run)' : 'duration', formatDuration(details.duration)],
          ...(details.span ? [['wall (begin to end, suspension included)', formatDuration(details.span.wall_ns)],
                              ['running (its pieces on threads)', formatDuration(details.span.running_ns)],
                              ['span', `${formatTime(details.span.begin)} … ${formatTime(details.span.end)}, began on ${details.span.began_on}`]] as [string, string][] : []),
          ['thread', details.thread], ...Object.entries(details.fields).map(readableField)]) +
    (details.attributes && details.attributes.length > 0
      ? `<h3>Attributes</h3>${list(details.attributes.map(escapeHtml))}` : '') +
    `<h3>Parent</h3><p>${spanLink(details.parent)}</p>` +
    `<h3>Children</h3>${list(details.children.map(spanLink), details.children_count)}` +
    `<h3>Notes</h3>${list(details.notes.map(n => `${formatTime(n.time)} ${escapeHtml(n.type)}: ${escapeHtml(n.text)}`))}`;
}

function showStats(stats: RangeStats) {
  hooks.publishPanel(panel, 'stats');
  panel.innerHTML = `<h3 id="details-title">Range ${formatTime(stats.begin)} … ${formatTime(stats.end)}</h3>` +
    rows([['length', formatDuration(stats.end - stats.begin)], ['tasks alive', stats.tasks.overlapping], ['created', stats.tasks.created],
          ['resolved', stats.tasks.resolved], ['failed', stats.tasks.failed], ['cancelled', stats.tasks.cancelled]]) +
    `<h3>Threads</h3>${list(stats.lanes.map(l => `${escapeHtml(l.name)}: ${l.spans} span ${l.spans === 1 ? 'piece' : 'pieces'}, busy (in a span of its own or a task run) ${formatDuration(l.busy_ns)} (${((l.busy_ns / Math.max(stats.end - stats.begin, 1)) * 100).toFixed(1)}%), idle ${formatDuration(l.idle_ns)}${l.blocked_ns || l.runnable_ns ? `, off CPU: blocked ${formatDuration(l.blocked_ns ?? 0)}, waiting for a CPU ${formatDuration(l.runnable_ns ?? 0)}` : ''}${l.samples ? `, ${l.samples.toLocaleString()} samples` : ''}`))}` +
    `<h3>Spans by wall time</h3><p style="color:#666">wall: begin to end, suspension included; running: the pieces on threads</p>` +
    (stats.names_complete ? list(stats.top_names.map(n => `${escapeHtml(n.name)}: ${n.spans} ${n.spans === 1 ? 'span' : 'spans'}, wall ${formatDuration(n.wall_ns)}, ` +
      `running ${formatDuration(n.running_ns)} in ${n.pieces} ${n.pieces === 1 ? 'piece' : 'pieces'}`)) : '<p>too many spans in this range to break down by name: select a shorter one</p>');
}

// A range's stats in the panel, and its flame graph below the timeline.
function showRange(range: View) {
  rangeSelection = range;
  draw();
  void backend.stats(range.begin, range.end).then(showStats);
  void flame.show(range.begin, range.end);
}

// Nothing selected, no range: the panel says how to select again.
function clearSelection() {
  selection = null;
  critical = new Set();
  rangeSelection = null;
  for (const key of Object.keys(panel.dataset)) delete panel.dataset[key];
  panel.innerHTML = panelHint;
  hooks.publishPanel(panel, 'none');
  draw();
}

async function select(target: Selection, reveal = false, scrollToTask = false) {
  selection = target;
  critical = new Set();
  draw();
  if (!target) return;
  if (target.kind === 'task') {
    const details = await backend.task(target.index);
    if (selection !== target) return;
    critical = new Set(details.critical_path.steps.map(step => step.index));
    critical.delete(details.index);
    showTask(details);
    if (reveal) revealTask(details);
    else if (scrollToTask) {
      const row = taskRowOf(details);
      if (row !== null && taskRowY(layout, row) !== undefined) scrollToOffset(taskY(row) - (scroller.clientHeight + pinnedEnd()) / 2);
    }
    draw();
  } else if (target.kind === 'counter') {
    showCounter(await backend.counter(target.index, view.begin, view.end));
  } else {
    const details = await backend.span(target.lane, target.depth, target.index);
    showSpan(details);
    const laneTop = layout.laneTop[target.lane];
    if (laneTop === undefined) {  // its group is collapsed: open it
      for (const header of layout.headers) if (header.key.endsWith('/threads') || header.level === 0) tracks.collapsed.delete(header.key);
      relayout();
    }
    if (reveal) revealRange(details.begin, details.end, layout.laneTop[target.lane] ?? 0);
  }
}

// Shows a task's line: in the tree its subtree's collapsed ancestors opened, the tasks group
// open, the window around the line and the rows scrolled to it.
function revealTask(details: TaskDetails) {
  let opened = false;
  if (taskOrder === 'tree')
    for (const [task, collapsed] of collapsedTasks)
      if (details.row > collapsed.row && details.row <= collapsed.row + collapsed.descendants) { collapsedTasks.delete(task); opened = true; }
  for (const header of layout.headers)
    if (header.collapsed && (header.key === `process:${details.process ?? 0}` || header.key === `process:${details.process ?? 0}/tasks`)) { tracks.collapsed.delete(header.key); opened = true; }
  if (opened) { countTaskRows(); relayout(); }
  revealRange(details.begin, details.end, taskY(taskRowOf(details) ?? 0));
}

// A counter's track: one per series, and here the threads that wrote it in the window (the breakdown).
function showCounter(breakdown: CounterBreakdown) {
  const info = summary.counters[breakdown.index];
  hooks.publishPanel(panel, 'counter', { counterThreads: String(breakdown.threads.length) });
  const added = breakdown.kind === 'counter';
  panel.innerHTML = `<h3 id="details-title">${escapeHtml(info.name)}</h3>` +
    rows([['kind', info.kind], ['min', formatNumber(info.min)], ['max', formatNumber(info.max)], ['samples', formatNumber(info.samples)]]) +
    `<h3>By thread, ${formatTime(breakdown.begin)} … ${formatTime(breakdown.end)}</h3>` +
    list(breakdown.threads.map(t => `${escapeHtml(t.name)} (${t.thread_id}): ${formatNumber(t.samples)} samples` +
      (t.samples ? (added ? `, added ${formatNumber(t.added)}` : `, ${formatNumber(t.min)} … ${formatNumber(t.max)}, last ${formatNumber(t.last)}`) : '')));
}

function revealRange(begin: number, end: number, y: number) {
  const length = Math.max(end - begin, MIN_ZOOM_NS * 10);
  setView(begin - length * 0.5, end + length * 0.5);
  if (y >= pinnedEnd()) scrollToOffset(y - pinnedEnd() - 80);
}

// Tasks merged into a bar: the window closes in on the part of the bar on screen, a tenth of it
// either side, so that its tasks can be told apart. Where that would hardly narrow the window (a
// bar filling the screen) the window halves around the click instead: it always closes in.
function closeInOnBar(begin: number, end: number, x: number) {
  const from = Math.max(begin, view.begin), to = Math.min(end, view.end);
  const margin = Math.max((to - from) * 0.1, MIN_ZOOM_NS);
  if (to - from + 2 * margin < (view.end - view.begin) * 0.9) setView(from - margin, to + margin);
  else zoomAround(x, 0.5);
}

panel.addEventListener('click', event => {
  const link = (event.target as HTMLElement).closest('a');
  if (!link) return;
  if (link.dataset.task) void select({ kind: 'task', index: Number(link.dataset.task) }, true);
  else if (link.dataset.span) void select({ kind: 'span', lane: Number(link.dataset.lane), depth: Number(link.dataset.depth), index: Number(link.dataset.span) }, true);
});

// ---- search ----

async function search(text: string) {
  highlight = text.trim().toLowerCase();
  requestWindow();  // the window's spans found by an attribute come marked
  if (!highlight) return;
  const answer = await backend.search(text.trim());
  hooks.publishPanel(panel, 'search');
  const link = (hit: SearchHit) => hit.kind === 'task'
    ? taskLink(hit)
    : spanLink(hit);
  const found = matchesTitle(answer.total, answer.hits.length, text);
  panel.innerHTML = `<h3 id="details-title">${found}</h3>${list(answer.hits.map(link))}`;
  const first = answer.hits[0];
  if (!first) return;
  // Jump to the first match and open it.
  if (first.kind === 'task') await select({ kind: 'task', index: first.index }, true);
  else await select({ kind: 'span', lane: first.lane, depth: first.depth, index: first.index }, true);
  panel.insertAdjacentHTML('afterbegin', `<h3>${found}</h3>${list(answer.hits.slice(0, 20).map(link), answer.hits.length)}<hr>`);
}

// "111 matches for “x”, the first 100 listed": the count is exact, the list may be cut.
function matchesTitle(total: number, listed: number, text: string) {
  const counted = `${formatNumber(total)} ${total === 1 ? 'match' : 'matches'} for “${escapeHtml(text)}”`;
  return listed < total ? `${counted}, the first ${formatNumber(listed)} listed` : counted;
}

onlyMatches.addEventListener('change', () => draw());

searchBox.addEventListener('keydown', event => {
  if (event.key === 'Enter') void search(searchBox.value);
  event.stopPropagation();
});

// ---- pointer and keys ----

let drag: { x: number; y: number; begin: number; end: number; moved: boolean; range: boolean } | null = null;

canvas.addEventListener('mousedown', event => {
  canvas.focus();
  drag = { x: event.offsetX, y: event.offsetY, begin: view.begin, end: view.end, moved: false, range: event.shiftKey };
  if (drag.range) rangeSelection = { begin: timeAt(event.offsetX), end: timeAt(event.offsetX) };
  canvas.style.cursor = drag.range ? 'col-resize' : 'grabbing';
});
window.addEventListener('mousemove', event => {
  if (!drag) return;
  const x = event.clientX - canvas.getBoundingClientRect().left;
  if (Math.abs(x - drag.x) > 3) drag.moved = true;
  if (drag.range) {
    rangeSelection = { begin: rangeSelection!.begin, end: timeAt(x) };
    draw();
  } else if (drag.moved) {
    const shift = ((x - drag.x) / width()) * (drag.end - drag.begin);
    setView(drag.begin - shift, drag.end - shift);
  }
});
window.addEventListener('mouseup', event => {
  if (!drag) return;
  const finished = drag;
  drag = null;
  canvas.style.cursor = 'grab';
  if (finished.range) {
    if (!rangeSelection || !finished.moved) { rangeSelection = null; draw(); return; }
    showRange(orderedRange(rangeSelection));
    return;
  }
  if (finished.moved) return;
  const rect = canvas.getBoundingClientRect();
  const x = event.clientX - rect.left, y = toLayoutY(event.clientY - rect.top);
  rangeSelection = null;
  const inside = (box: readonly unknown[]) => {
    const [x0, x1, y0, y1] = box as number[];
    return x >= x0 && x <= x1 && y >= y0 && y <= y1;
  };
  const control = controls.find(inside);
  if (control) { control[4](); return; }
  const toggle = taskHits.toggles.find(inside);
  if (toggle) { toggleSubtree(toggle[4]); return; }
  const hit = hitBoxes.find(inside);
  // A run in a thread lane also scrolls the tasks to its task's row (the window stays).
  if (hit) { void select(hit[4], false, hit[5] === 'run'); return; }
  // In the tasks: a task where it is drawn solid, else an arrow passing by, else the task whose row it is.
  // Tasks by time sit side by side on a row, their boxes a pixel wider than drawn: the one the
  // pointer is on is hit_test.ts's, as for the tooltip.
  const solid = drawnAt(taskHits.solid, x, y, () => 1);
  if (solid && solid.apart === 0) { void select({ kind: 'task', index: solid.box[4] }); return; }
  const block = taskHits.blocks.find(inside);
  if (block) { closeInOnBar(block[4], block[5], x); return; }
  if (solid) { void select({ kind: 'task', index: solid.box[4] }); return; }
  const arrow = arrowAt(taskHits, x, y);
  if (arrow) { followArrow(arrow); return; }
  const line = taskHits.lines.find(inside);
  void select(line ? { kind: 'task', index: line[4] } : null);
});
// A task's subtree collapses or opens; the server then leaves its rows out, or puts them back.
function toggleSubtree(task: number) {
  if (collapsedTasks.has(task)) collapsedTasks.delete(task);
  else {
    const line = data?.tasks.lines.find(l => l[3] === task);
    if (!line) return;
    collapsedTasks.set(task, { row: line[9], descendants: line[7] });
  }
  requestWindow();
}

// A click on an arrow goes to its other end: the end away from the selected task, or where it points.
function followArrow(arrow: ArrowTuple) {
  const [, fromTask, toTask] = arrow;
  const target = selection?.kind === 'task' && selection.index === toTask ? fromTask : toTask;
  void select({ kind: 'task', index: target }, true);
}

// The wheel zooms around the pointer; shift+wheel scrolls the lanes and tasks (Chromium turns a
// shifted wheel into a horizontal one, so either delta is taken); a sideways swipe of a trackpad
// (horizontal delta, no vertical) pans.
canvas.addEventListener('wheel', event => {
  event.preventDefault();
  const scale = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? scroller.clientHeight : 1;
  const dx = event.deltaX * scale, dy = event.deltaY * scale;
  if (event.shiftKey) scrollToOffset(currentOffset() + (dy !== 0 ? dy : dx));
  else if (dy === 0 && dx !== 0) pan((dx / width()) * (view.end - view.begin));
  else zoomAround(event.offsetX, Math.exp(dy * 0.002));
}, { passive: false });

// W/S zoom and A/D pan, as Perfetto and Tracy do; zoom around the pointer when it is over the timeline.
let pointerX: number | null = null;
canvas.addEventListener('mousemove', event => {
  pointerX = event.offsetX;
  const tip = drag ? null : hover.find(event.offsetX, toLayoutY(event.offsetY), timeAt(event.offsetX));
  if (tip && event.offsetY > RULER_HEIGHT) tips.showTip(tip, event.clientX, event.clientY); else tips.hideTip();
});
canvas.addEventListener('mouseleave', () => { pointerX = null; tips.hideTip(); });
window.addEventListener('keydown', event => {
  if (event.target === searchBox) return;
  const key = event.key.toLowerCase();
  const anchor = pointerX ?? width() / 2;
  if (key === 'w') zoomAround(anchor, 0.8);
  else if (key === 's') zoomAround(anchor, 1.25);
  else if (key === 'a') pan(-(view.end - view.begin) * 0.1);
  else if (key === 'd') pan((view.end - view.begin) * 0.1);
  else if (key === 'escape') clearSelection();
  else return;
  event.preventDefault();
});
scroller.addEventListener('scroll', followScroll);
window.addEventListener('resize', resize);

// A hook for tests and the curious: the state the page draws from.
hooks.installHook('chronicleViewer', {
  summary: () => summary,
  view: () => ({ ...view }),
  data: () => data,
  counts: () => ({ ...counts }),
  selection: () => selection,
  rangeSelection: () => (rangeSelection ? orderedRange(rangeSelection) : null),
  setView,
  // Where a span, or a counter track at a time, is on the page (client coordinates), to hover it;
  // null when its group is collapsed. A lane's spans are under its task runs.
  spanPoint(lane: number, depth: number, index: number) {
    const span = data?.lanes.find(l => l.lane === lane)?.spans.find(s => s[2] === depth && s[3] === index);
    const laneTop = layout.laneTop[lane];
    if (!span || laneTop === undefined) return null;
    const rect = canvas.getBoundingClientRect();
    const x0 = Math.max(xOf(span[0]), 0), x1 = Math.min(Math.max(xOf(span[1]), xOf(span[0]) + 1), width());
    const row = (summary.lanes[lane].run_depths ?? 0) + depth;
    const y = laneTop + LANE_HEADER + row * SPAN_ROW + SPAN_ROW / 2;
    return { x: rect.left + (x0 + x1) / 2, y: rect.top + toCanvasY(y), hidden: underPinned(y) };
  },
  counterPoint(counter: number, time: number) {
    const counterTop = layout.counterTop[counter];
    if (counterTop === undefined) return null;
    const rect = canvas.getBoundingClientRect();
    const y = counterTop + LANE_HEADER + COUNTER_TRACK / 2;
    return { x: rect.left + xOf(time), y: rect.top + toCanvasY(y), hidden: underPinned(y) };
  },
  taskHits: () => taskHits,
  collapsed: () => [...collapsedTasks.keys()],
  toggleSubtree,
  taskOrder: () => taskOrder,
  setTaskOrder,
  // Where a group header's pin (or unpin) link is (client coordinates).
  pinPoint(key: string) {
    const point = pinPoints.get(key);
    if (!point) return null;
    const rect = canvas.getBoundingClientRect();
    return { x: rect.left + point[0], y: rect.top + toCanvasY(point[1]), hidden: underPinned(point[1]) };
  },
  // Where the tasks group's switch between by time and as a tree is (client coordinates).
  taskOrderSwitchPoint(key: string) {
    const point = switchPoints.get(key);
    if (!point) return null;
    const rect = canvas.getBoundingClientRect();
    return { x: rect.left + point[0], y: rect.top + toCanvasY(point[1]), hidden: underPinned(point[1]) };
  },
  // Where a track group's header is on the page (client coordinates), to click it.
  headerPoint(key: string) {
    const header = layout.headers.find(h => h.key === key);
    if (!header) return null;
    const rect = canvas.getBoundingClientRect();
    const y = header.top + LANE_HEADER / 2;
    return { x: rect.left + 60, y: rect.top + toCanvasY(y), hidden: underPinned(y) };
  },
  layout: () => layout,
  // A task run drawn in a thread lane and on screen (client coordinates), to click it.
  runPoint() {
    const rect = canvas.getBoundingClientRect();
    for (const [x0, x1, y0, y1, target, what] of hitBoxes) {
      const x = (Math.max(x0, 0) + Math.min(x1, width())) / 2, y = toCanvasY((y0 + y1) / 2);
      if (what === 'run' && target?.kind === 'task' && x1 - x0 >= 4 && y > RULER_HEIGHT && y < canvas.clientHeight) return { x: rect.left + x, y: rect.top + y, task: target.index };
    }
    return null;
  },
  // The layout pixels scrolled past, and a scroll to a layout y (the scrollbar may be scaled).
  scrollOffset: currentOffset,
  scrollTo: scrollToOffset,
  // Where the pinned lanes end on the canvas (the ruler's height when none are pinned). The
  // points above say `hidden` when they lie under them.
  pinnedEnd,
  // Where tasks merged into a bar are on the page (client coordinates; the widest on screen, whose
  // middle no task drawn beside it reaches), and the times they cover.
  taskBlockPoint() {
    const rect = canvas.getBoundingClientRect();
    let best: { x: number; y: number; begin: number; end: number } | null = null, widest = 0;
    for (const [x0, x1, y0, y1, begin, end] of taskHits.blocks) {
      const left = Math.max(x0, 0), right = Math.min(x1, width()), y = (y0 + y1) / 2;
      if (right - left > widest && !underPinned(y) && toCanvasY(y) > RULER_HEIGHT && toCanvasY(y) < canvas.clientHeight) {
        widest = right - left;
        best = { x: rect.left + (left + right) / 2, y: rect.top + toCanvasY(y), begin, end };
      }
    }
    return best;
  },
  // Where a task's line is on the page (client coordinates), to click it.
  taskPoint(index: number) {
    const line = data?.tasks.lines.find(l => l[3] === index);
    if (!line) return null;
    const rect = canvas.getBoundingClientRect();
    const x0 = Math.max(xOf(line[0]), 0), x1 = Math.min(Math.max(xOf(line[1]), xOf(line[0]) + 1), width());  // as drawn
    const y = taskY(line[2]) + TASK_ROW / 2;
    return { x: rect.left + (x0 + x1) / 2, y: rect.top + toCanvasY(y), hidden: underPinned(y) };
  },
});

// The trace is not whole: say so where it cannot be missed, with every line on hover.
function showWarnings(warnings: string[]) {
  const element = document.getElementById('warnings') as HTMLSpanElement;
  element.hidden = warnings.length === 0;
  element.textContent = warnings.length === 1 ? `⚠ ${warnings[0]}` : `⚠ ${warnings[0]} (+${warnings.length - 1} more)`;
  element.title = warnings.join('\n');
}

const flame = new FlamePane(backend, () => summary.duration,
  () => backend.flamesOfSamples && summary.lanes.some(lane => (lane.samples ?? 0) > 0));
hooks.installHook('chronicleFlame', flame.hook());

// A link to a view (url_state.ts): its collapsed groups and subtrees, window, selection and range
// come back; a selected task's row is scrolled to (only the rows on screen are asked for).
async function restoreFromUrl() {
  const state = readUrlState();
  tracks.pins = new Map(state.pins ?? []);
  setTaskOrder(state.taskOrder ?? 'time');
  restoreCollapsedGroups(state.groups);
  await restoreCollapsedSubtrees(state.subtrees ?? []);
  if (state.window) setView(state.window.begin, state.window.end);
  if (state.range) showRange(state.range);
  if (state.selection) void select(state.selection, false, true).catch(() => { selection = null; draw(); });
  linkRestored = true;
  draw();
}

// A fragment edited in the open tab (the page's own rewrites use replaceState, which fires no
// hashchange) applies at once: what it leaves out is cleared, as a fresh open would have it. The
// fragment is the event's: a rewrite of the page's own, due before the event came, may have put
// the old one back in the address meanwhile (the next rewrite puts the new one).
window.addEventListener('hashchange', event => { void followEditedUrl(new URL(event.newURL).hash); });
async function followEditedUrl(hash: string) {
  const state = readUrlState(hash);
  collapsedTasks.clear();
  tracks.pins = new Map(state.pins ?? []);
  taskOrder = state.taskOrder ?? 'time';
  countTaskRows();
  restoreCollapsedGroups(state.groups);
  await restoreCollapsedSubtrees(state.subtrees ?? []);
  setView(state.window?.begin ?? 0, state.window?.end ?? Math.max(summary.duration, MIN_ZOOM_NS));
  clearSelection();
  if (state.range) showRange(state.range);
  if (state.selection) void select(state.selection, false, true).catch(() => { selection = null; draw(); });
}

// The groups a link collapses, all of them (undefined: the trace's defaults); only the keys of
// groups this trace has (a link may come from another trace, or be mangled).
function restoreCollapsedGroups(keys: string[] | undefined) {
  const all = computeLayout(summary, { collapsed: new Set(), order: tracks.order }, taskRowCount).headers.map(h => h.key);
  tracks.collapsed.clear();
  for (const key of keys ?? defaultGroups) if (all.includes(key)) tracks.collapsed.add(key);
  relayout();
}

// A subtree is taken out by its task's tree row and size, which its details tell; tasks that do
// not exist (or have no children) are left alone.
async function restoreCollapsedSubtrees(tasks: number[]) {
  const candidates = tasks.filter(task => task < summary.tasks);
  const answers = await Promise.allSettled(candidates.map(task => backend.task(task)));
  answers.forEach((answer, k) => {
    if (answer.status === 'fulfilled' && answer.value.descendants > 0)
      collapsedTasks.set(candidates[k], { row: answer.value.row, descendants: answer.value.descendants });
  });
  if (collapsedTasks.size === 0) return;
  countTaskRows();
  relayout();
}

async function start() {
  summary = await backend.summary();
  document.title = `chronicle · ${summary.title}`;
  (document.getElementById('title') as HTMLSpanElement).textContent = summary.title;
  showWarnings(summary.warnings ?? []);
  countTaskRows();
  defaultGroups = defaultCollapsed(summary);
  view = { begin: 0, end: Math.max(summary.duration, MIN_ZOOM_NS) };
  relayout();
  await restoreFromUrl();
  hooks.publishReady();
}

start().catch(error => { panel.textContent = `cannot load the trace: ${error}`; });
