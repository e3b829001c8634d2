// Level of detail for the self-contained page (`view --html`), which has no server to ask: the
// same rules, step for step, as the server's (src/viewer/timeline_queries.cpp: visible_in_row,
// window_tasks, window_tasks_by_time, window_arrows, window_messages, the counters in TimelineIndex::window; the caps
// in src/viewer/json_api.cpp). The numbers (minimum width, caps) come from the C++ in the page's
// data (`level_of_detail`), and viewer/e2e/html_windows.check.mjs holds every answer to the
// server's `/api/window` on the same traces: change both sides together.

// What the server embeds: its constants, so that the page never has copies of its own.
export interface DetailRules {
  min_pixels: number;              // an interval at least this many pixels wide is drawn alone
  counter_points_per_pixel: number;  // more samples than this per pixel: one min-max point per column
  max_task_rows: number;
  max_task_items: number;          // lines and blocks: whole rows while they fit
  max_arrows: number;
  max_messages: number;
  max_lane_items: number;
}

// The first k in [lo, hi) with values[k] >= x (values ascending), as std::lower_bound.
export function lowerBound(values: ArrayLike<number>, x: number, lo = 0, hi = values.length): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// The first k in [lo, hi) with values[k] > x, as std::upper_bound.
export function upperBound(values: ArrayLike<number>, x: number, lo = 0, hi = values.length): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] <= x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// A row of intervals, sorted and not overlapping (ends already at least their begins).
export interface IntervalRow { begins: number[]; ends: number[] }

export function intervalRow(items: ArrayLike<number>[]): IntervalRow {
  return { begins: Array.from(items, item => item[0]), ends: Array.from(items, item => Math.max(item[0], item[1])) };
}

export interface Scale { begin: number; end: number; width: number; nsPerPixel: number }

// The window as the server normalises it: at least 1 ns long and 1 pixel wide.
export function scaleOf(begin: number, end: number, width: number): Scale {
  end = Math.max(end, begin + 1);
  width = Math.max(width, 1);
  return { begin, end, width, nsPerPixel: (end - begin) / width };
}

// visible_in_row: intervals at least `minPixels` wide alone (`wide`), the others merged into
// busy blocks (`block`, with the index of its first interval) that take in every interval
// beginning before the end of the pixel column after the one their end is in.
export function visibleInRow(row: IntervalRow, scale: Scale, minPixels: number,
                             wide: (k: number) => void, block: (begin: number, end: number, count: number, first: number) => void) {
  const { begins, ends } = row;
  const { begin, end, nsPerPixel } = scale;
  const count = begins.length;
  const minNs = minPixels * nsPerPixel;
  const isWide = (k: number) => ends[k] - begins[k] >= minNs;
  const reachAfter = (time: number) => {
    const column = Math.floor((time - begin) / nsPerPixel);
    const reach = begin + (column + 2) * nsPerPixel;
    return reach >= end ? end : Math.floor(reach);
  };
  let i = lowerBound(ends, begin);
  while (i < count && begins[i] <= end) {
    if (isWide(i)) { wide(i); ++i; continue; }
    let blockEnd = ends[i], blockCount = 1;
    const blockBegin = begins[i];
    let next = i + 1;
    while (next < count) {
      const past = upperBound(begins, reachAfter(Math.max(blockEnd, begin)), next);
      if (past === next) break;
      const last = past - 1;
      if (isWide(last)) {
        blockCount += last - next;
        if (last > next) blockEnd = ends[last - 1];
        next = last;
        break;
      }
      blockCount += past - next;
      blockEnd = ends[last];
      next = past;
    }
    block(blockBegin, blockEnd, blockCount, i);
    i = next;
  }
}

// window_tasks: a task's runs in the window, merged where less than a pixel apart.
export function runsInView(begins: number[], ends: number[], scale: Scale): number[] {
  const out: number[] = [];
  const gap = Math.max(scale.nsPerPixel, 1);
  let i = lowerBound(ends, scale.begin);
  while (i < begins.length && begins[i] <= scale.end) {
    const pieceBegin = begins[i];
    let pieceEnd = ends[i];
    let next = i + 1;
    while (next < begins.length) {
      const past = upperBound(begins, Math.floor(pieceEnd + gap), next);
      if (past === next) break;
      pieceEnd = Math.max(pieceEnd, ends[past - 1]);
      next = past;
    }
    out.push(pieceBegin, pieceEnd);
    i = next;
  }
  return out;
}

// The pixel column of a time (one more, clamped), which arrows and messages are merged by.
export function columnOf(scale: Scale, time: number): number {
  return Math.floor(Math.min(Math.max((time - scale.begin) / scale.nsPerPixel, -1), scale.width + 1) + 1);
}

// std::bit_width of a non-negative integer.
export function bitWidth(value: number): number {
  return value <= 0 ? 0 : Math.floor(value).toString(2).length;
}

// A counter's points in the window: every sample when there are few, else per pixel column its
// first sample's time, the column's min and max, and its last value; first the sample before the
// window (its value at the left edge).
export function counterPoints(times: number[], values: number[], scale: Scale, perPixel: number):
  { downsampled: boolean; points: [number, number, number, number][] } {
  const { begin, end, width, nsPerPixel } = scale;
  const first = lowerBound(times, begin);
  const last = upperBound(times, end);
  const points: [number, number, number, number][] = [];
  if (first > 0) points.push([times[first - 1], values[first - 1], values[first - 1], values[first - 1]]);
  if (last - first <= perPixel * width) {
    for (let k = first; k < last; ++k) points.push([times[k], values[k], values[k], values[k]]);
    return { downsampled: false, points };
  }
  let columnFirst = first;
  for (let column = 0; column < width && columnFirst < last; ++column) {
    const columnEnd = Math.floor(begin + (column + 1) * nsPerPixel);
    const columnLast = lowerBound(times, columnEnd, columnFirst, last);
    if (columnLast === columnFirst) continue;
    let low = values[columnFirst], high = values[columnFirst];
    for (let k = columnFirst + 1; k < columnLast; ++k) { low = Math.min(low, values[k]); high = Math.max(high, values[k]); }
    points.push([times[columnFirst], low, high, values[columnLast - 1]]);
    columnFirst = columnLast;
  }
  return { downsampled: true, points };
}
