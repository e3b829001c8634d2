// The critical path of a task, worked out in the page from the facts it carries: the same walk
// as src/analysis/critical_path.cpp (see there for the rules), over times in ns. Time and memory
// are linear in the path's length (a binary search per step), so a page never needs a path
// per task embedded.

// [id text, kind (string), created, resolved, parent task, resolver task (-1: none or itself),
//  outcome text (string), creating thread (string), seen created (0/1), busy ns,
//  runs [thread (string), begin, end, ended (0/1)] in order of their beginning,
//  waits [time, awaited task, ...] flattened in time order, notes [time, type, text] (strings),
//  notes count]
export type TaskFacts = [string, number, number | null, number | null, number, number, number, number | null, number,
  number, [number, number, number, number][], number[], [number, number, number][], number];

export interface PathStep { task: number; what: string; from: number; to: number }

// The last wait before `moment`, as [time, awaited task]; null when none.
function lastWaitBefore(waits: number[], moment: number): [number, number] | null {
  let low = 0, high = waits.length / 2;  // waits[2k] < moment for k < low
  while (low < high) {
    const middle = (low + high) >> 1;
    if (waits[2 * middle] < moment) low = middle + 1; else high = middle;
  }
  return low === 0 ? null : [waits[2 * (low - 1)], waits[2 * (low - 1) + 1]];
}

// The earliest run beginning in [from, before); `before` when none.
function firstRunBetween(runs: [number, number, number, number][], from: number, before: number): number {
  let low = 0, high = runs.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (runs[middle][1] < from) low = middle + 1; else high = middle;
  }
  return low < runs.length && runs[low][1] < before ? runs[low][1] : before;
}

export function criticalPath(facts: TaskFacts[], first: number, edges: number, target: number): PathStep[] {
  const beginning = (task: number) => {
    const f = facts[task];
    return f[2] !== null ? f[2] : f[10].length ? f[10][0][1] : first;
  };
  const lastActivity = (task: number) => {
    const f = facts[task];
    if (f[3] !== null) return f[3];
    let last = f[2] !== null ? f[2] : first;
    for (const run of f[10]) last = Math.max(last, run[2]);
    return last;
  };
  const backwards: PathStep[] = [];
  let current = target, moment = lastActivity(target), atResolution = facts[target][3] !== null;
  // A task is entered at a given moment once: the walk ends on any graph, cycles included.
  const entered = new Map<number, number>();
  const stepLimit = 4 * (facts.length + edges) + 16;
  while (backwards.length < stepLimit) {
    const f = facts[current];
    const seen = entered.get(current);
    if (seen !== undefined && seen <= moment) break;
    entered.set(current, moment);
    if (atResolution && f[5] >= 0 && f[5] !== current) {
      backwards.push({ task: current, what: `resolved by ${facts[f[5]][0]}`, from: moment, to: moment });
      current = f[5];
      atResolution = false;
      continue;
    }
    atResolution = false;
    const wait = lastWaitBefore(f[11], moment);
    if (wait) {
      const [waited, awaited] = wait, resolved = facts[awaited][3];
      if (resolved !== null && resolved <= moment && resolved >= waited) {
        backwards.push({ task: current, what: `ran after ${facts[awaited][0]} finished`, from: resolved, to: moment });
        current = awaited;
        moment = resolved;
        atResolution = true;
        continue;
      }
      backwards.push({ task: current, what: `waited on ${facts[awaited][0]}, released before it finished`, from: waited, to: moment });
      moment = waited;
      continue;
    }
    const began = Math.min(beginning(current), moment);
    const firstRun = firstRunBetween(f[10], began, moment);
    if (firstRun > began && firstRun < moment) {
      backwards.push({ task: current, what: 'ran', from: firstRun, to: moment });
      backwards.push({ task: current, what: 'pending since creation (queued or waiting for I/O)', from: began, to: firstRun });
    } else {
      backwards.push({ task: current, what: 'ran since creation', from: began, to: moment });
    }
    moment = began;
    if (f[4] < 0 || beginning(f[4]) > moment) break;
    current = f[4];
  }
  return backwards.reverse();
}
