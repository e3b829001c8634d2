// Which of the boxes around a point the pointer is on: one rule for the tooltip (tooltip.ts) and
// the click (main.ts). A thin item's box reaches `slop` pixels past what is drawn on each side,
// so boxes side by side (tasks by time) overlap there; the point is on the item drawn under it,
// else on the one whose drawn part is nearest, then the one whose centre is nearest. Among items
// drawn under it, or equally near, the last drawn (on top) wins.

// x0, x1, y0, y1 of the box as it reaches, then what the caller keeps with it.
export type ReachBox = readonly [number, number, number, number, ...unknown[]];

export interface DrawnAt<B> {
  box: B;
  apart: number;  // pixels between the point and what is drawn: 0 when drawn under it
}

export function drawnAt<B extends ReachBox>(boxes: readonly B[], x: number, y: number,
                                             slop: (box: B) => number): DrawnAt<B> | null {
  let best: DrawnAt<B> | null = null;
  let bestCentre = Infinity;
  for (let k = boxes.length - 1; k >= 0; --k) {
    const box = boxes[k];
    const [x0, x1, y0, y1] = box;
    if (!(x >= x0 && x <= x1 && y >= y0 && y <= y1)) continue;
    const reach = slop(box);
    const apart = Math.max(0, x0 + reach - x, x - (x1 - reach));
    const centre = apart === 0 ? 0 : Math.abs((x0 + x1) / 2 - x);
    if (!best || apart < best.apart || (apart === best.apart && centre < bestCentre)) {
      best = { box, apart };
      bestCentre = centre;
    }
  }
  return best;
}
