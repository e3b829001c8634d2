// The flame graph of a range for a self-contained page (`chronicle view --html`), the answer
// the server's /api/flame gives (src/analysis/flame_graph.cpp, the same rules), merged by name
// path, clipped to the range and to their parent; split by thread (`threadNames` given, one per
// thread), each thread's under a frame of its own. Running mode (aggregateFlame): the pieces of
// spans nested by each thread's stack; wall mode (aggregateWholeFlame): whole spans, each under
// the span around it (docs/viewer.md, "A span's time").
import type { FlameAnswer, FlameFrameTuple } from './api';

// Every span whole, by begin: [begin, end, site, lane it began on, the span around it (-1: none),
// running ns] (src/viewer/timeline_index.hpp, WholeSpans).
export type WholeSpanTuple = [number, number, number, number, number, number];

// One thread's spans per depth, each [begin, end, site], sorted by begin.
type Depths = [number, number, number][][];

interface Frame { parent: number; name: number; total: number; count: number; children: Map<number, number> }

function firstEndingAtOrAfter(row: [number, number, number][], time: number) {
  let low = 0, high = row.length;
  while (low < high) { const mid = (low + high) >> 1; if (row[mid][1] < time) low = mid + 1; else high = mid; }
  return low;
}
function firstBeginningAfter(row: [number, number, number][], time: number) {
  let low = 0, high = row.length;
  while (low < high) { const mid = (low + high) >> 1; if (row[mid][0] <= time) low = mid + 1; else high = mid; }
  return low;
}

export function aggregateFlame(begin: number, end: number, threads: Depths[], nameOf: (site: number) => string, threadNames?: string[]): FlameAnswer {
  const frames: Frame[] = [{ parent: -1, name: -1, total: 0, count: 0, children: new Map() }];
  const names: string[] = [];
  const nameIds = new Map<string, number>();
  const nameId = (site: number) => {
    const name = nameOf(site);
    let id = nameIds.get(name);
    if (id === undefined) { id = names.length; names.push(name); nameIds.set(name, id); }
    return id;
  };
  const childOf = (parent: number, name: number) => {
    let frame = frames[parent].children.get(name);
    if (frame === undefined) {
      frame = frames.length;
      frames.push({ parent, name, total: 0, count: 0, children: new Map() });
      frames[parent].children.set(name, frame);
    }
    return frame;
  };
  // A thread's name gets an id of its own, never a span name's: its frame is apart from every other.
  const laneOfName = new Map<number, number>();
  threads.forEach((depths, lane) => {
    let outer = 0;
    const threadName = names.length;
    if (threadNames) {
      outer = -1;  // made when the thread's first span in the range is met
      laneOfName.set(threadName, lane);
      names.push(threadNames[lane] ?? `thread ${lane}`);
    }
    const outerFrame = () => (outer >= 0 ? outer : (outer = childOf(0, threadName)));
    let above: [number, number, number][] | null = null, aboveFirst = 0, aboveFrames: number[] = [];
    for (const row of depths) {
      const first = firstEndingAtOrAfter(row, begin), last = Math.max(first, firstBeginningAfter(row, end));
      const rowFrames: number[] = [];
      let parent = aboveFirst;
      const aboveLast = aboveFirst + aboveFrames.length;
      for (let k = first; k < last; ++k) {
        const [b, e, site] = row[k];
        let from = Math.max(b, begin), to = Math.min(e, end), parentFrame = -1;
        if (above) {
          while (parent + 1 < aboveLast && above[parent + 1][0] <= b) ++parent;
          if (parent < aboveLast && above[parent][0] <= b && b <= above[parent][1]) {
            parentFrame = aboveFrames[parent - aboveFirst];
            from = Math.max(from, above[parent][0]);
            to = Math.min(to, above[parent][1]);
          }
        }
        const outermost = parentFrame < 0;
        if (outermost) parentFrame = outerFrame();
        const frame = childOf(parentFrame, nameId(site));
        const time = Math.max(to - from, 0);
        frames[frame].total += time;
        frames[frame].count++;
        if (outermost) {
          frames[parentFrame].total += time;
          if (parentFrame !== 0) frames[0].total += time;
        }
        rowFrames.push(frame);
      }
      above = row; aboveFirst = first; aboveFrames = rowFrames;
    }
  });
  // Depth-first, each frame's children largest first, as the server orders them.
  const out: FlameFrameTuple[] = [];
  const threadFrames: [number, number][] = [];
  const visit = (frame: number, parent: number) => {
    const f = frames[frame];
    const children = [...f.children.values()].sort((a, b) => frames[b].total - frames[a].total || frames[a].name - frames[b].name);
    const childTotal = children.reduce((sum, c) => sum + frames[c].total, 0);
    const at = out.length;
    out.push([parent, f.name, f.total, Math.max(f.total - childTotal, 0), f.count]);
    if (threadNames && parent === 0) threadFrames.push([at, laneOfName.get(f.name)!]);
    for (const child of children) visit(child, at);
  };
  visit(0, -1);
  const answer: FlameAnswer = { begin, end, source: 'spans', mode: 'running', names, frames: out };
  return threadNames ? { ...answer, by: 'thread', threads: threadFrames } : answer;
}

export function aggregateWholeFlame(begin: number, end: number, whole: WholeSpanTuple[], nameOf: (site: number) => string, threadNames?: string[]): FlameAnswer {
  const frames: Frame[] = [{ parent: -1, name: -1, total: 0, count: 0, children: new Map() }];
  const names: string[] = [];
  const nameIds = new Map<string, number>();
  const nameId = (site: number) => {
    const name = nameOf(site);
    let id = nameIds.get(name);
    if (id === undefined) { id = names.length; names.push(name); nameIds.set(name, id); }
    return id;
  };
  const childOf = (parent: number, name: number) => {
    let frame = frames[parent].children.get(name);
    if (frame === undefined) {
      frame = frames.length;
      frames.push({ parent, name, total: 0, count: 0, children: new Map() });
      frames[parent].children.set(name, frame);
    }
    return frame;
  };
  const laneOfName = new Map<number, number>();
  const threadFrameOfLane = new Map<number, number>();
  const placed = new Map<number, { frame: number; from: number; to: number }>();
  whole.forEach(([b, e, site, lane, parentSpan], k) => {
    if (b > end || e < begin) return;
    let from = Math.max(b, begin), to = Math.min(e, end), frame: number;
    const parent = parentSpan >= 0 ? placed.get(parentSpan) : undefined;
    if (parent) {
      from = Math.max(from, parent.from);
      to = Math.min(to, parent.to);
      frame = childOf(parent.frame, nameId(site));
    } else {
      let outer = 0;
      if (threadNames) {
        let threadFrame = threadFrameOfLane.get(lane);
        if (threadFrame === undefined) {
          const threadName = names.length;
          names.push(threadNames[lane] ?? `thread ${lane}`);
          laneOfName.set(threadName, lane);
          threadFrame = childOf(0, threadName);
          threadFrameOfLane.set(lane, threadFrame);
        }
        outer = threadFrame;
      }
      frame = childOf(outer, nameId(site));
      frames[outer].total += Math.max(to - from, 0);
      if (outer !== 0) frames[0].total += Math.max(to - from, 0);
    }
    frames[frame].total += Math.max(to - from, 0);
    frames[frame].count++;
    placed.set(k, { frame, from, to: Math.max(from, to) });
  });
  const out: FlameFrameTuple[] = [];
  const threadFrames: [number, number][] = [];
  const visit = (frame: number, parent: number) => {
    const f = frames[frame];
    const children = [...f.children.values()].sort((a, b) => frames[b].total - frames[a].total || frames[a].name - frames[b].name);
    const childTotal = children.reduce((sum, c) => sum + frames[c].total, 0);
    const at = out.length;
    out.push([parent, f.name, f.total, Math.max(f.total - childTotal, 0), f.count]);
    if (threadNames && parent === 0) threadFrames.push([at, laneOfName.get(f.name)!]);
    for (const child of children) visit(child, at);
  };
  visit(0, -1);
  const answer: FlameAnswer = { begin, end, source: 'spans', mode: 'wall', names, frames: out };
  return threadNames ? { ...answer, by: 'thread', threads: threadFrames } : answer;
}
