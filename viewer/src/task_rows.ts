// Task rows as shown when some subtrees are collapsed: tasks are in tree order (a subtree is a
// run of rows right after its task), so collapsing a task takes its descendants' rows out, and
// a hidden task is drawn on its collapsed ancestor's row. The server does the same
// (src/viewer/task_tree.cpp); the page needs it to find a task's row and to answer alone.
export interface CollapsedTask { row: number; descendants: number }  // row in the tree

export class ShownRows {
  private hidden: { first: number; last: number; before: number }[] = [];
  readonly count: number;

  constructor(private rows: number, collapsed: Iterable<CollapsedTask>) {
    const ranges = [...collapsed].filter(c => c.descendants > 0).map(c => [c.row + 1, c.row + 1 + c.descendants]).sort((a, b) => a[0] - b[0]);
    let before = 0;
    for (const [first, last] of ranges) {
      const previous = this.hidden[this.hidden.length - 1];
      if (previous && first < previous.last) continue;  // inside a collapsed ancestor
      this.hidden.push({ first, last, before });
      before += last - first;
    }
    this.count = rows - before;
  }

  // Whether the tree row is hidden in a collapsed subtree.
  isHidden(row: number) { return this.hidden.some(range => row >= range.first && row < range.last); }

  shownRow(row: number): number {
    let found = -1;
    for (let k = 0; k < this.hidden.length && this.hidden[k].first <= row; ++k) found = k;
    if (found < 0) return row;
    const range = this.hidden[found];
    if (row < range.last) return range.first - 1 - range.before;
    return row - range.before - (range.last - range.first);
  }

  // The tree rows shown as rows [first, last).
  treeRows(first: number, last: number): number[] {
    const out: number[] = [];
    last = Math.min(last, this.count);
    let next = 0, row = first;
    while (next < this.hidden.length && this.hidden[next].first <= row) { row += this.hidden[next].last - this.hidden[next].first; ++next; }
    for (let shown = first; shown < last && row < this.rows; ++shown) {
      out.push(row);
      ++row;
      if (next < this.hidden.length && this.hidden[next].first === row) row = this.hidden[next++].last;
    }
    return out;
  }
}
