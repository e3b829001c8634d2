// The tasks group, as the original Lwt viewer drew it: each task on its row (by time, rows
// reused once their task has ended, or a row per task in tree order), a thin line from its
// creation to its resolution, thick where it ran, coloured by outcome, in the tree a toggle on
// the tasks that created others; by time, tasks too narrow to tell apart as one bar per row
// (red when one of them failed); and the arrows between tasks: created-by (faint grey), waits-on
// (blue), resolved-by (green). Arrows long on screen fade (the short ones nearby are the detail
// worth seeing); the selected task's arrows are drawn strong, and the tasks on its critical path
// outlined.
import type { ArrowTuple, WindowAnswer } from './api';
import { arrowTip, HoverTargets, taskBlockTip, taskTip } from './tooltip';
import { TASK_ROW } from './tracks';

export const STATE_COLOURS = ['#3a9d5d', '#d64545', '#e0a030', '#8a8a8a'];  // ok, failed, cancelled, unresolved
export const ARROW_COLOURS = ['#2f6fdf', '#17a34a', '#9aa0a8'];            // wait, resolve, created
const CRITICAL_COLOUR = '#ff7a00';
const SELECTED_ARROW_WIDTH = 2.5;
const FADE_FROM_PX = 150;  // arrows longer than this on screen fade

export interface TaskScene {
  context: CanvasRenderingContext2D;
  width: number;
  xOf(time: number): number;
  rowY(row: number): number;            // top of a shown row
  selectedTask: number | null;
  critical: Set<number>;                // tasks on the selected task's critical path
  collapsed: Set<number>;
  toggles: boolean;                     // subtrees can collapse (the tree order)
  matches(name: string): boolean;
  drawLabel(text: string, x0: number, x1: number, y: number, height: number): boolean;
  kindName(kind: number): string;
  hover: HoverTargets;                  // tooltips: each drawn item is registered with it
}

export interface TaskCounts {
  lines: number; blocks: number; blockTasks: number; runs: number; labels: number; toggles: number; critical: number;
  arrows: number; arrowsShown: number; createdArrowsShown: number; arrowsHighlighted: number;
}

// What a click can hit: a task's row, the parts of it drawn solid (its thin line and its runs:
// there a click takes the task before an arrow through it; each a pixel wider on both sides than
// drawn), tasks merged into a bar (a click zooms to them), a toggle, an arrow (its segment).
export interface TaskHits {
  lines: [number, number, number, number, number][];   // x0, x1, y0, y1, task
  blocks: [number, number, number, number, number, number][];  // x0, x1, y0, y1, begin, end: merged tasks
  solid: [number, number, number, number, number][];
  toggles: [number, number, number, number, number][];  // x0, x1, y0, y1, task
  arrows: { x0: number; y0: number; x1: number; y1: number; arrow: ArrowTuple }[];
}

export function drawTaskRows(scene: TaskScene, answer: WindowAnswer): { counts: TaskCounts; hits: TaskHits } {
  const counts: TaskCounts = { lines: 0, blocks: 0, blockTasks: 0, runs: 0, labels: 0, toggles: 0, critical: 0, arrows: 0, arrowsShown: 0, createdArrowsShown: 0, arrowsHighlighted: 0 };
  const hits: TaskHits = { lines: [], blocks: [], solid: [], toggles: [], arrows: [] };
  const { context } = scene;
  const { hover } = scene;
  for (const [b, e, row, task, state, kind, , descendants, runs] of answer.tasks.lines) {
    const y = scene.rowY(row), middle = y + TASK_ROW / 2;
    const x0 = scene.xOf(b), x1 = Math.max(scene.xOf(e), x0 + 1);
    const name = answer.tasks.names[task] ?? '';
    const colour = STATE_COLOURS[state];
    const tip = (run?: [number, number]) => () => taskTip(name, scene.kindName(kind), b, e, state, descendants, run);
    context.fillStyle = colour;
    context.fillRect(x0, middle - 1, x1 - x0, 2);  // alive
    hits.solid.push([x0 - 1, x1 + 1, middle - 2, middle + 2, task]);
    hover.rect(x0 - 1, x1 + 1, middle - 2, middle + 2, tip(), 1);
    for (let k = 0; k + 1 < runs.length; k += 2) {  // ran
      const r0 = scene.xOf(runs[k]), r1 = Math.max(scene.xOf(runs[k + 1]), r0 + 1);
      context.fillRect(r0, y + 3, r1 - r0, TASK_ROW - 6);
      hits.solid.push([r0 - 1, r1 + 1, y + 3, y + TASK_ROW - 3, task]);
      hover.rect(r0, r1, y + 3, y + TASK_ROW - 3, tip([runs[k], runs[k + 1]]));
      counts.runs++;
    }
    const selected = scene.selectedTask === task;
    const critical = scene.critical.has(task);
    if (selected || critical || scene.matches(name)) {
      context.strokeStyle = selected ? '#000' : critical ? CRITICAL_COLOUR : '#f0c000';
      context.lineWidth = 2;
      context.strokeRect(x0 - 1, y + 1, x1 - x0 + 2, TASK_ROW - 2);
      if (critical) counts.critical++;
    }
    if (descendants > 0 && scene.toggles) {
      // The toggle sits just before the line's beginning, or at the left edge when that is off screen.
      const tx = Math.max(Math.min(x0 - 11, scene.width - 10), 1);
      context.fillStyle = '#444';
      context.font = '9px system-ui, sans-serif';
      context.fillText(scene.collapsed.has(task) ? `▸${descendants}` : '▾', tx, middle + 1);
      hits.toggles.push([tx - 1, tx + 10, y, y + TASK_ROW, task]);
      counts.toggles++;
    }
    context.fillStyle = '#111';
    context.font = '9px system-ui, sans-serif';
    if (scene.drawLabel(name, x0 + 1, x1, y, TASK_ROW)) counts.labels++;
    context.font = '11px system-ui, sans-serif';
    hits.lines.push([x0 - 2, x1 + 2, y, y + TASK_ROW, task]);
    hover.area(x0 - 2, x1 + 2, y, y + TASK_ROW, tip());
    counts.lines++;
  }
  drawTaskBlocks(scene, answer, counts, hits);
  drawArrows(scene, answer, counts, hits);
  return { counts, hits };
}

function drawTaskBlocks(scene: TaskScene, answer: WindowAnswer, counts: TaskCounts, hits: TaskHits) {
  const { context } = scene;
  for (const [b, e, row, count, failed, cancelled] of answer.tasks.blocks) {
    const y = scene.rowY(row);
    const x0 = scene.xOf(b), x1 = Math.max(scene.xOf(e), x0 + 1);
    context.fillStyle = STATE_COLOURS[failed > 0 ? 1 : cancelled > 0 ? 2 : 0];
    context.globalAlpha = 0.6;
    context.fillRect(x0, y + 4, x1 - x0, TASK_ROW - 8);
    context.globalAlpha = 1;
    scene.hover.rect(x0, x1, y, y + TASK_ROW, () => taskBlockTip(b, e, count, failed, cancelled));
    hits.blocks.push([x0, x1, y + 4, y + TASK_ROW - 4, b, e]);
    counts.blocks++;
    counts.blockTasks += count;
  }
}

function drawArrows(scene: TaskScene, answer: WindowAnswer, counts: TaskCounts, hits: TaskHits) {
  const { context } = scene;
  const taskName = (task: number) => answer.tasks.names[task] || `task #${task}`;
  // Created-by first (under the others), the selected task's last (over everything).
  const order = [...answer.arrows].sort((a, b) => rank(scene, a) - rank(scene, b));
  for (const arrow of order) {
    const [kind, fromTask, toTask, fromTime, toTime, fromRow, toRow, merged] = arrow;
    const x0 = scene.xOf(fromTime), x1 = scene.xOf(toTime);
    const y0 = scene.rowY(fromRow) + TASK_ROW / 2, y1 = scene.rowY(toRow) + TASK_ROW / 2;
    const length = Math.hypot(x1 - x0, y1 - y0);
    const highlighted = scene.selectedTask !== null && (fromTask === scene.selectedTask || toTask === scene.selectedTask);
    const base = kind === 2 ? 0.35 : 0.85;
    context.globalAlpha = highlighted ? 1 : base * Math.max(0.12, Math.min(1, FADE_FROM_PX / Math.max(length, 1)));
    context.strokeStyle = context.fillStyle = ARROW_COLOURS[kind] ?? ARROW_COLOURS[0];
    context.lineWidth = highlighted ? SELECTED_ARROW_WIDTH : 1;
    context.beginPath();
    context.moveTo(x0, y0);
    context.lineTo(x1, y1);
    context.stroke();
    const angle = Math.atan2(y1 - y0, x1 - x0), head = highlighted ? 8 : 5;
    context.beginPath();
    context.moveTo(x1, y1);
    context.lineTo(x1 - head * Math.cos(angle - 0.4), y1 - head * Math.sin(angle - 0.4));
    context.lineTo(x1 - head * Math.cos(angle + 0.4), y1 - head * Math.sin(angle + 0.4));
    context.fill();
    hits.arrows.push({ x0, y0, x1, y1, arrow });
    scene.hover.segment(x0, y0, x1, y1, () => arrowTip(kind, taskName(fromTask), taskName(toTask), fromTime, toTime, merged));
    counts.arrows++;
    counts.arrowsShown += merged;
    if (kind === 2) counts.createdArrowsShown += merged;
    if (highlighted) counts.arrowsHighlighted++;
  }
  context.globalAlpha = 1;
  context.lineWidth = 1;
}

function rank(scene: TaskScene, arrow: ArrowTuple) {
  if (scene.selectedTask !== null && (arrow[1] === scene.selectedTask || arrow[2] === scene.selectedTask)) return 2;
  return arrow[0] === 2 ? 0 : 1;
}

// The arrow whose drawn segment passes within `slack` pixels of (x, y), the nearest.
export function arrowAt(hits: TaskHits, x: number, y: number, slack = 4): ArrowTuple | null {
  let best: ArrowTuple | null = null, bestDistance = slack;
  for (const { x0, y0, x1, y1, arrow } of hits.arrows) {
    const dx = x1 - x0, dy = y1 - y0, length2 = dx * dx + dy * dy;
    const t = length2 === 0 ? 0 : Math.max(0, Math.min(1, ((x - x0) * dx + (y - y0) * dy) / length2));
    const distance = Math.hypot(x - (x0 + t * dx), y - (y0 + t * dy));
    if (distance <= bestDistance) { best = arrow; bestDistance = distance; }
  }
  return best;
}
