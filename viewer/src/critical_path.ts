// The critical path of a task, worked out in the page from the facts it carries: the same walk
// as src/analysis/critical_path.cpp (see there for the rules), over times in ns. Time and memory
// are linear in the path's length (a binary search per step), so a page never needs a path
// per task embedded.

// [id text, kind (string), created, resolved, parent task, resolver task (-1: none or itself),
//  outcome text (string), creating thread (string), seen created (0/1), busy ns,
//  runs [thread (string), begin, end, ended (0/1)] in order of their beginning,
//  waits [time, awaited task, ...] flattened in time order, notes [time, type, text] (strings),
//  notes count, its own attributes ("key = value", strings)]
export type TaskFacts = [string, number, number | null, number | null, number, number, number, number | null, number,
  number, [number, number, number, number][], number[], [number, number, number][], number, number[]];

// What the task did during a step (src/analysis/critical_path.hpp's StepState).
export type StepState = 'ran' | 'queued' | 'waiting' | 'blocked';
export interface PathStep { task: number; state: StepState; what: string; from: number; to: number }

// How a step of a task's own time is explained: the gap before its first run there (the lead),
// and its runs. The lead is the first gap wherever it lies when leadIsFirstGap, else only a gap
// at the step's beginning.
interface OwnTime { leadState: StepState; leadWhat: string; ranWhat: string; leadIsFirstGap: boolean }

const kSuspended = 'suspended between runs (no wait recorded)';

// The steps of a task's own time [from, to], in time order, split by its runs (as
// critical_path.cpp's add_own_time).
function ownTime(task: number, f: TaskFacts, from: number, to: number, own: OwnTime): PathStep[] {
  const runs = f[10];
  if (!runs.length) return [{ task, state: 'ran', what: own.ranWhat, from, to }];
  const pieces: PathStep[] = [];
  let k = firstRunFrom(runs, from);
  if (k > 0 && runs[k - 1][2] > from) --k;
  let cursor = from, leadOpen = true;
  const gapUntil = (until: number) => {
    if (until <= cursor) return;
    pieces.push(leadOpen ? { task, state: own.leadState, what: own.leadWhat, from: cursor, to: until }
      : { task, state: 'waiting', what: kSuspended, from: cursor, to: until });
    leadOpen = false;
    cursor = until;
  };
  for (; k < runs.length && runs[k][1] < to; ++k) {
    const begin = Math.max(runs[k][1], from), end = Math.min(runs[k][2], to);
    if (end <= begin || end <= cursor) continue;
    gapUntil(begin);
    if (!own.leadIsFirstGap) leadOpen = false;
    const last = pieces[pieces.length - 1];
    if (last && last.state === 'ran' && last.to >= begin) last.to = end;
    else pieces.push({ task, state: 'ran', what: own.ranWhat, from: Math.max(begin, cursor), to: end });
    cursor = end;
  }
  // The resolution recorded just after the last run ended belongs to that run.
  const last = pieces[pieces.length - 1];
  if (cursor < to && last && last.state === 'ran' && f[3] === to) last.to = to;
  else gapUntil(to);
  if (!pieces.length) pieces.push({ task, state: own.leadState, what: own.leadWhat, from, to });
  return pieces;
}

// The last wait before `moment`, as [time, awaited task]; null when none.
function lastWaitBefore(waits: number[], moment: number): [number, number] | null {
  let low = 0, high = waits.length / 2;  // waits[2k] < moment for k < low
  while (low < high) {
    const middle = (low + high) >> 1;
    if (waits[2 * middle] < moment) low = middle + 1; else high = middle;
  }
  return low === 0 ? null : [waits[2 * (low - 1)], waits[2 * (low - 1) + 1]];
}

// The first run beginning at or after `from`; runs.length when none.
function firstRunFrom(runs: [number, number, number, number][], from: number): number {
  let low = 0, high = runs.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (runs[middle][1] < from) low = middle + 1; else high = middle;
  }
  return low;
}

// kindOf(task): the task's kind ('io', 'timer', 'coroutine', ...).
export function criticalPath(facts: TaskFacts[], first: number, edges: number, target: number,
  kindOf: (task: number) => string): PathStep[] {
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
  // Visits, not steps, are bounded: a task's own time is as many steps as it has runs there.
  const visitLimit = 4 * (facts.length + edges) + 16;
  for (let visits = 0; visits < visitLimit; ++visits) {
    const f = facts[current];
    const seen = entered.get(current);
    if (seen !== undefined && seen <= moment) break;
    entered.set(current, moment);
    if (atResolution && f[5] >= 0 && f[5] !== current) {
      backwards.push({ task: current, state: 'waiting', what: `resolved by ${facts[f[5]][0]}`, from: moment, to: moment });
      current = f[5];
      atResolution = false;
      continue;
    }
    atResolution = false;
    const wait = lastWaitBefore(f[11], moment);
    if (wait) {
      const [waited, awaited] = wait, resolved = facts[awaited][3];
      if (resolved !== null && resolved <= moment && resolved >= waited) {
        const id = facts[awaited][0];
        backwards.push(...ownTime(current, f, resolved, moment,
          { leadState: 'queued', leadWhat: `queued after ${id} finished`, ranWhat: `ran after ${id} finished`, leadIsFirstGap: false }).reverse());
        current = awaited;
        moment = resolved;
        atResolution = true;
        continue;
      }
      backwards.push(...ownTime(current, f, waited, moment,
        { leadState: 'waiting', leadWhat: `waited on ${facts[awaited][0]}, released before it finished`, ranWhat: 'ran', leadIsFirstGap: true }).reverse());
      moment = waited;
      continue;
    }
    const began = Math.min(beginning(current), moment);
    // Before its first run, an operation (I/O, a timer) was in flight; any other task was ready
    // from its creation, so it waited for its turn.
    const kind = kindOf(current), operation = kind === 'io' || kind === 'timer';
    const waitingForOperation = 'waiting for its operation (I/O or a timer) since creation';
    if (operation && !f[10].length)
      backwards.push({ task: current, state: 'waiting', what: waitingForOperation, from: began, to: moment });
    else if (operation)
      backwards.push(...ownTime(current, f, began, moment, { leadState: 'waiting', leadWhat: waitingForOperation, ranWhat: 'ran', leadIsFirstGap: false }).reverse());
    else if (!f[10].length)
      backwards.push({ task: current, state: 'ran', what: 'ran since creation', from: began, to: moment });
    else
      backwards.push(...ownTime(current, f, began, moment, { leadState: 'queued', leadWhat: 'queued since creation', ranWhat: 'ran', leadIsFirstGap: false }).reverse());
    moment = began;
    if (f[4] < 0 || beginning(f[4]) > moment) break;
    current = f[4];
  }
  return backwards.reverse();
}
