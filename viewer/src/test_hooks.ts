// What the page tells the end-to-end checks (viewer/e2e) and the curious, in one place: facts as
// data attributes of <body> (document.body.dataset.x), and objects on `window` to ask it
// questions. The drawing code calls one function per fact; the attribute names are what the
// checks read, so they stay as they are.

// What one frame drew, counted as it was drawn.
export interface DrawCounts {
  groups: number; headers: number; messages: number; messagesShown: number; lanes: number; spans: number; blocks: number;
  runs: number; laneRuns: number[]; taskLines: number; taskRuns: number; taskBlocks: number; tasksShown: number; toggles: number; critical: number;
  arrows: number; arrowsShown: number; createdArrowsShown: number; arrowsHighlighted: number; labels: number; taskLabels: number; counters: number;
  offCpu: number;  // stretches of threads off their CPU drawn (merged ones count once)
  samples: number;  // stack samples drawn as ticks (merged ones count each)
  spansMatched: number;  // spans the search text matches, by name or by an attribute
  spansFilteredOut: number;  // spans drawn faint ("only matches")
  lost: number; lostMarks: number;  // events lost, as the marks drawn on lane headers count them
}
export function noCounts(): DrawCounts {
  return { groups: 0, headers: 0, messages: 0, messagesShown: 0, lanes: 0, spans: 0, blocks: 0, runs: 0, laneRuns: [], taskLines: 0, taskRuns: 0,
           taskBlocks: 0, tasksShown: 0, toggles: 0, critical: 0, arrows: 0, arrowsShown: 0, createdArrowsShown: 0, arrowsHighlighted: 0, labels: 0,
           taskLabels: 0, counters: 0, offCpu: 0, samples: 0,
           spansMatched: 0, spansFilteredOut: 0, lost: 0, lostMarks: 0 };
}

const facts = () => document.body.dataset;

// The summary is in, the layout made and what the URL asked for restored.
export function publishReady() { facts().ready = 'true'; }

// Whether the answer for the view shown has come (false from the moment a window is asked for).
export function publishSettled(settled: boolean) { facts().settled = String(settled); }

// The lane headers as last drawn, top to bottom.
export function publishLaneLabels(labels: string[]) { facts().laneLabels = JSON.stringify(labels); }

// The ruler's labels as last drawn, left to right.
export function publishRulerLabels(labels: string[]) { facts().rulerLabels = JSON.stringify(labels); }

export function publishFetchTime(ms: number) { facts().fetchMs = ms.toFixed(1); }
export function publishRenderTime(ms: number) { facts().renderMs = ms.toFixed(1); }

export function publishDrawCounts(counts: DrawCounts) {
  const body = facts();
  body.lanesDrawn = String(counts.lanes);
  body.groupsDrawn = String(counts.groups);
  body.messagesDrawn = String(counts.messages);
  body.messagesShown = String(counts.messagesShown);
  body.spansDrawn = String(counts.spans);
  body.spanBlocksDrawn = String(counts.blocks);
  body.runsDrawn = String(counts.runs);
  body.laneRunsShown = JSON.stringify(counts.laneRuns);
  body.taskRunsDrawn = String(counts.taskRuns);
  body.togglesDrawn = String(counts.toggles);
  body.criticalDrawn = String(counts.critical);
  body.createdArrowsShown = String(counts.createdArrowsShown);
  body.arrowsHighlighted = String(counts.arrowsHighlighted);
  body.headersDrawn = String(counts.headers);
  body.countersDrawn = String(counts.counters);
  body.offCpuDrawn = String(counts.offCpu);
  body.samplesDrawn = String(counts.samples);
  body.spansMatched = String(counts.spansMatched);
  body.spansFilteredOut = String(counts.spansFilteredOut);
  body.lostDrawn = String(counts.lost);
  body.lostMarksDrawn = String(counts.lostMarks);
  body.taskLinesDrawn = String(counts.taskLines);
  body.taskBlocksDrawn = String(counts.taskBlocks);
  body.tasksShown = String(counts.tasksShown);
  body.arrowsDrawn = String(counts.arrows);
  body.arrowsShown = String(counts.arrowsShown);
  body.labelsDrawn = String(counts.labels);
  body.taskLabelsDrawn = String(counts.taskLabels);
}

// Task rows once the collapsed subtrees are out, and the shown rows [first, last) last asked for.
export function publishTaskRows(rows: number, asked: [number, number]) {
  facts().taskRows = String(rows);
  facts().taskRowsAsked = asked.join('-');
}

// The window shown, the one the drawn answer is for, and how many answers have been drawn.
export function publishView(view: { begin: number; end: number }, answer: { begin: number; end: number } | null, windowsLoaded: number) {
  const body = facts();
  body.viewBegin = String(view.begin);
  body.viewEnd = String(view.end);
  body.windowsLoaded = String(windowsLoaded);
  body.dataBegin = String(answer?.begin ?? '');
  body.dataEnd = String(answer?.end ?? '');
}

// The fragment the URL was last given (url_state.ts).
export function publishUrl(fragment: string) { facts().url = fragment; }

// The flame graph pane: asked for (not ready), shown for [begin, end], drawn, closed.
export function publishFlameLoading() { facts().flameReady = 'false'; }
export function publishFlameShown(begin: number, end: number, byThread: boolean) {
  const body = facts();
  body.flameBegin = String(begin);
  body.flameEnd = String(end);
  body.flameBy = byThread ? 'thread' : 'path';
}
export function publishFlameReady() { facts().flameReady = 'true'; }
export function publishFlameDrawn(frames: number, zoom: number) {
  facts().flameFramesDrawn = String(frames);
  facts().flameZoom = String(zoom);
}
export function publishFlameClosed() { delete facts().flameReady; }

// An object to ask the page questions: window.chronicleViewer, window.chronicleFlame.
export function installHook(name: 'chronicleViewer' | 'chronicleFlame', hook: object) {
  (window as unknown as Record<string, unknown>)[name] = hook;
}

// What the details panel shows: `kind` (task, span, stats, counter, search) and facts about it.
export function publishPanel(panel: HTMLElement, kind: string, about: Record<string, string> = {}) {
  panel.dataset.kind = kind;
  Object.assign(panel.dataset, about);
}

// What the tooltip tells (cleared when it hides), and for a flame graph frame its numbers.
export function publishTip(box: HTMLElement, kind: string | null, title?: string) {
  for (const key of Object.keys(box.dataset)) delete box.dataset[key];
  if (kind === null) return;
  box.dataset.kind = kind;
  box.dataset.title = title ?? '';
}
export function publishFrameTip(total: number, self: number, count: number) {
  const box = document.getElementById('tooltip');
  if (box) Object.assign(box.dataset, { total: String(total), self: String(self), count: String(count) });
}
