// The flame graph pane: the spans of a selected range (or of the whole trace) as an icicle, the
// outermost spans on top, merged by call path over every thread, each frame as wide as its time
// in the range (the server's /api/flame, or the page's own in a self-contained file). A click on
// a frame zooms into it (its ancestors stay above it, a click on one zooms back out); hovering
// tells a frame's name, total, self time and count. "by thread" splits it: a root per thread
// (lane), named as the lane, with that thread's spans under it. "samples" (a trace recorded with
// --sample) makes the frames of the samples' call stacks instead, by function, outermost on top,
// each as wide as its samples.
import type { Backend, FlameAnswer, FlameMode, FlameSource } from './api';
import { hideTip, showTip, Tip } from './tooltip';
import { formatDuration, formatTime } from './time_format';
import * as hooks from './test_hooks';

const FRAME_HEIGHT = 17;
const MIN_FRAME_PX = 1;  // narrower frames (and so their children) are not drawn

interface Placed { frame: number; x0: number; x1: number; y: number }

function colourOf(name: string): string {
  let hash = 2166136261;
  for (let k = 0; k < name.length; ++k) hash = Math.imul(hash ^ name.charCodeAt(k), 16777619);
  return `hsl(${(hash >>> 0) % 360}, 55%, 62%)`;
}

export class FlamePane {
  private root: HTMLDivElement;
  private title: HTMLSpanElement;
  private path: HTMLSpanElement;
  private scroller: HTMLDivElement;
  private canvas: HTMLCanvasElement;
  private context: CanvasRenderingContext2D;
  private answer: FlameAnswer | null = null;
  private children: number[][] = [];
  private zoom = 0;
  private placed: Placed[] = [];
  private requested = 0;
  private byThread = false;
  private shown: { begin: number; end: number; label?: string } | null = null;
  private byThreadBox: HTMLInputElement;
  private source: FlameSource = 'spans';
  private mode: FlameMode = 'wall';
  private runningBox: HTMLInputElement;
  private samplesBox: HTMLInputElement;
  private samplesLabel: HTMLLabelElement;

  constructor(private backend: Backend, private traceDuration: () => number, private hasSamples: () => boolean) {
    this.root = document.createElement('div');
    this.root.id = 'flame';
    this.root.hidden = true;
    Object.assign(this.root.style, { gridColumn: '1 / 3', borderTop: '2px solid #aab', display: 'none', flexDirection: 'column', minHeight: '0' });
    this.root.innerHTML =
      '<div style="display:flex;gap:8px;align-items:center;padding:3px 8px;background:#f4f5f7;border-bottom:1px solid #ccc">' +
      '<b>Flame graph</b><span id="flame-title" style="color:#555"></span><span id="flame-path"></span>' +
      '<span style="margin-left:auto;color:#777">click: zoom into a frame · hover: its times</span>' +
      '<label title="a root per thread, with its spans under it" style="white-space:nowrap"><input type="checkbox" id="flame-by-thread"> by thread</label>' +
      '<label title="running time: the pieces of spans on threads (a coroutine\'s span without its suspensions); unticked: wall time, each span from begin to end, suspension included" style="white-space:nowrap">' +
      '<input type="checkbox" id="flame-running"> running</label>' +
      '<label id="flame-samples-label" title="the call stacks of the stack samples (record --sample) instead of the spans" style="white-space:nowrap" hidden>' +
      '<input type="checkbox" id="flame-samples"> samples</label>' +
      '<button id="flame-whole">whole trace</button><button id="flame-close">close</button></div>' +
      '<div id="flame-scroller" style="flex:1;overflow-y:auto;overflow-x:hidden;min-height:0"><canvas id="flame-canvas" style="display:block"></canvas></div>';
    document.getElementById('app')!.appendChild(this.root);
    this.title = this.root.querySelector('#flame-title')!;
    this.path = this.root.querySelector('#flame-path')!;
    this.scroller = this.root.querySelector('#flame-scroller')!;
    this.canvas = this.root.querySelector('#flame-canvas')!;
    this.context = this.canvas.getContext('2d')!;
    this.byThreadBox = this.root.querySelector('#flame-by-thread')!;
    this.byThreadBox.onchange = () => this.setByThread(this.byThreadBox.checked);
    this.runningBox = this.root.querySelector('#flame-running')!;
    this.runningBox.onchange = () => this.setMode(this.runningBox.checked ? 'running' : 'wall');
    this.samplesBox = this.root.querySelector('#flame-samples')!;
    this.samplesLabel = this.root.querySelector('#flame-samples-label')!;
    this.samplesBox.onchange = () => this.setSource(this.samplesBox.checked ? 'samples' : 'spans');
    (this.root.querySelector('#flame-close') as HTMLButtonElement).onclick = () => this.close();
    (this.root.querySelector('#flame-whole') as HTMLButtonElement).onclick = () => void this.show(0, this.traceDuration(), 'the whole trace');
    this.path.addEventListener('click', event => {
      const link = (event.target as HTMLElement).closest('a');
      if (link?.dataset.frame) this.zoomTo(Number(link.dataset.frame));
    });
    this.canvas.addEventListener('mousemove', event => this.hover(event));
    this.canvas.addEventListener('mouseleave', () => hideTip());
    this.canvas.addEventListener('click', event => {
      const hit = this.frameAt(event.offsetX, event.offsetY);
      if (hit !== null) this.zoomTo(hit);
    });
    window.addEventListener('resize', () => { if (this.answer) this.draw(); });
    this.addOpenButton();
  }

  // A button in the top bar: the flame graph of the whole trace.
  private addOpenButton() {
    const button = document.createElement('button');
    button.id = 'flame-open';
    button.style.whiteSpace = 'nowrap';
    button.textContent = 'Flame graph';
    button.title = 'the flame graph of the whole trace (shift+drag over the timeline: of a range)';
    button.onclick = () => void this.show(0, this.traceDuration(), 'the whole trace');
    const help = document.getElementById('help');
    help?.parentElement?.insertBefore(button, help);
  }

  // Merged by call path over every thread, or a root per thread: the range shown again.
  setByThread(byThread: boolean) {
    this.byThread = byThread;
    this.byThreadBox.checked = byThread;
    if (this.shown) void this.show(this.shown.begin, this.shown.end, this.shown.label);
  }

  // The spans, or the samples' call stacks: the range shown again.
  setSource(source: FlameSource) {
    this.source = source;
    this.samplesBox.checked = source === 'samples';
    if (this.shown) void this.show(this.shown.begin, this.shown.end, this.shown.label);
  }

  // Wall time (whole spans) or running time (their pieces on threads): the range shown again.
  setMode(mode: FlameMode) {
    this.mode = mode;
    this.runningBox.checked = mode === 'running';
    if (this.shown) void this.show(this.shown.begin, this.shown.end, this.shown.label);
  }

  async show(begin: number, end: number, label?: string) {
    const number = ++this.requested;
    this.shown = { begin, end, label };
    hooks.publishFlameLoading();
    this.open();
    this.title.textContent = `${label ?? `${formatTime(begin)} … ${formatTime(end)}`} · loading…`;
    this.samplesLabel.hidden = !this.hasSamples();
    if (this.samplesLabel.hidden) this.source = 'spans';
    const answer = await this.backend.flame(begin, end, this.byThread, this.source, this.mode);
    if (number !== this.requested) return;
    this.answer = answer;
    this.children = answer.frames.map(() => []);
    answer.frames.forEach(([parent], k) => { if (parent >= 0) this.children[parent].push(k); });
    this.zoom = 0;
    this.title.textContent = `${label ?? `range ${formatTime(answer.begin)} … ${formatTime(answer.end)}`} · ` +
      `${this.amount(answer.frames[0][2])}${answer.source === 'samples' ? '' : ` of ${answer.source}` +
        (answer.mode === 'running' ? ' (running time: pieces on threads)' : ' (wall time: begin to end, suspension included)')} in ` +
      `${answer.frames.length - 1 - (answer.threads?.length ?? 0)} call paths` +
      (answer.threads ? ` on ${answer.threads.length} threads` : '');
    hooks.publishFlameShown(answer.begin, answer.end, answer.by === 'thread');
    this.draw();
    hooks.publishFlameReady();
  }

  close() {
    this.requested++;
    this.answer = null;
    this.shown = null;
    this.root.hidden = true;
    this.root.style.display = 'none';
    document.getElementById('app')!.style.gridTemplateRows = '';
    hooks.publishFlameClosed();
    window.dispatchEvent(new Event('resize'));
  }

  private open() {
    if (!this.root.hidden) return;
    this.root.hidden = false;
    this.root.style.display = 'flex';
    document.getElementById('app')!.style.gridTemplateRows = 'auto minmax(0, 1fr) 38%';
    window.dispatchEvent(new Event('resize'));
  }

  private name(frame: number) {
    const id = this.answer!.frames[frame][1];
    return id < 0 ? `all ${this.answer!.source}` : this.answer!.names[id];
  }

  private isThread(frame: number) { return this.answer!.threads?.some(([f]) => f === frame) ?? false; }

  private zoomTo(frame: number) {
    this.zoom = frame;
    this.draw();
  }

  private ancestors(frame: number) {
    const chain: number[] = [];
    for (let f = frame; f >= 0; f = this.answer!.frames[f][0]) chain.unshift(f);
    return chain;
  }

  private draw() {
    const answer = this.answer!;
    const chain = this.ancestors(this.zoom);
    const width = this.scroller.clientWidth;
    // Parents come before their children: one pass gives every depth.
    const depths: number[] = [];
    answer.frames.forEach(([parent], k) => { depths[k] = parent < 0 ? 0 : depths[parent] + 1; });
    const height = (depths.reduce((most, d) => Math.max(most, d), 0) + 2) * FRAME_HEIGHT;
    const ratio = window.devicePixelRatio || 1;
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${height}px`;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    const context = this.context;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    context.font = '11px system-ui, sans-serif';
    context.textBaseline = 'middle';
    this.placed = [];
    // The zoomed frame's ancestors span the width above it.
    chain.forEach((frame, row) => this.drawFrame(frame, 0, width, row * FRAME_HEIGHT, frame !== this.zoom));
    const scale = answer.frames[this.zoom][2] > 0 ? width / answer.frames[this.zoom][2] : 0;
    const layChildren = (frame: number, x: number, row: number) => {
      for (const child of this.children[frame]) {
        const childWidth = answer.frames[child][2] * scale;
        if (childWidth >= MIN_FRAME_PX) {
          this.drawFrame(child, x, x + childWidth, row * FRAME_HEIGHT, false);
          layChildren(child, x, row + 1);
        }
        x += childWidth;
      }
    };
    layChildren(this.zoom, 0, chain.length);
    this.path.innerHTML = chain.length > 1
      ? chain.map(f => `<a data-frame="${f}" style="color:#1a5fb4;cursor:pointer;text-decoration:underline">${escapeText(this.name(f))}</a>`).join(' › ')
      : '';
    hooks.publishFlameDrawn(this.placed.length, this.zoom);
  }

  private drawFrame(frame: number, x0: number, x1: number, y: number, ancestor: boolean) {
    const context = this.context;
    const name = this.name(frame);
    context.fillStyle = frame === 0 ? '#c8ccd4' : ancestor ? '#dde0e6' : colourOf(name);
    context.fillRect(x0, y, Math.max(x1 - x0 - 1, 1), FRAME_HEIGHT - 1);
    const room = x1 - x0 - 6;
    if (room > 14) {
      let label = name;
      if (context.measureText(label).width > room) {
        const keep = Math.floor(room / (context.measureText(label).width / label.length)) - 1;
        label = keep >= 3 ? label.slice(0, keep) + '…' : '';
      }
      context.fillStyle = '#111';
      if (label) context.fillText(label, x0 + 3, y + FRAME_HEIGHT / 2);
    }
    this.placed.push({ frame, x0, x1, y });
  }

  private frameAt(x: number, y: number): number | null {
    for (const { frame, x0, x1, y: top } of this.placed)
      if (x >= x0 && x < x1 && y >= top && y < top + FRAME_HEIGHT) return frame;
    return null;
  }

  private tip(frame: number): Tip {
    const [, , total, self, count] = this.answer!.frames[frame];
    const all = this.answer!.frames[0][2];
    return {
      kind: 'frame', title: this.name(frame),
      rows: [[this.timeWord(), `${this.amount(total)} (${all ? ((total / all) * 100).toFixed(1) : '0'}%)`], ['self', this.amount(self)],
             [this.answer!.mode === 'running' ? 'count (pieces)' : 'count', frame === 0 || this.isThread(frame) ? '—' : count.toLocaleString()], ['path', this.ancestors(frame).slice(1).map(f => this.name(f)).join(' › ') || '—']],
    };
  }

  // What a frame's total is: which time of its spans (docs/viewer.md, "A span's time").
  private timeWord() {
    if (this.answer?.source === 'samples') return 'total';
    return this.answer?.mode === 'running' ? 'total (running)' : 'total (wall)';
  }

  // A frame's weight: time for spans, a count for samples (their period is not in the trace).
  private amount(weight: number) {
    return this.answer?.source === 'samples' ? `${weight.toLocaleString()} ${weight === 1 ? 'sample' : 'samples'}` : formatDuration(weight);
  }

  private hover(event: MouseEvent) {
    const frame = this.frameAt(event.offsetX, event.offsetY);
    if (frame === null) { hideTip(); return; }
    showTip(this.tip(frame), event.clientX, event.clientY);
    const [, , total, self, count] = this.answer!.frames[frame];
    hooks.publishFrameTip(total, self, count);
  }

  // For tests: the answer, the zoom, and where each drawn frame is (client coordinates).
  hook() {
    return {
      answer: () => this.answer,
      zoom: () => this.zoom,
      byThread: () => this.byThread,
      setByThread: (byThread: boolean) => this.setByThread(byThread),
      setSource: (source: FlameSource) => this.setSource(source),
      setMode: (mode: FlameMode) => this.setMode(mode),
      samplesOffered: () => !this.samplesLabel.hidden,
      frames: () => {
        const rect = this.canvas.getBoundingClientRect();
        return this.placed.map(p => ({ frame: p.frame, name: this.name(p.frame), x: rect.left + (p.x0 + p.x1) / 2, y: rect.top + p.y + FRAME_HEIGHT / 2, width: p.x1 - p.x0 }));
      },
    };
  }
}

function escapeText(text: string) {
  return text.replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]!));
}
