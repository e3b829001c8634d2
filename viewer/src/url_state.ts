// The URL holds what is shown, so that a view can be shared as a link:
//   #t0=BEGIN&t1=END&sel=task:INDEX | sel=span:LANE:DEPTH:INDEX | sel=counter:INDEX &r0=BEGIN&r1=END
//    &cg=0/threads,1,0/monitor&ct=12,40&to=tree&pin=0/counters,-0/threads
// (ns since the trace's first event: the window, the selected item, the selected range; the
// collapsed track groups, their keys without "process:", all of them: without `cg` a trace opens
// with its default ones collapsed, chronicle's own counters; and the collapsed task subtrees, by
// task index; `to=tree`: the tasks as the tree, not by time; `pin`: the groups pinned, or with a
// `-` not pinned, unlike the default, which pins the threads). A link may be stale or mangled:
// what cannot be read is left out, never thrown.
// Opening such a link restores them; moving about rewrites the fragment in place
// (history.replaceState: the back button is not filled with every frame).
import { publishUrl } from './test_hooks';

export type SelectionRef =
  { kind: 'task'; index: number } | { kind: 'span'; lane: number; depth: number; index: number } | { kind: 'counter'; index: number } | null;

export interface UrlState {
  window?: { begin: number; end: number };
  selection?: SelectionRef;
  range?: { begin: number; end: number };
  groups?: string[];    // collapsed track groups, as tracks.ts keys them ("process:0/threads")
  defaultGroups?: string[];  // those collapsed on opening: an empty `cg` is written when they are open
  subtrees?: number[];  // task indexes whose subtrees are collapsed
  taskOrder?: 'time' | 'tree';  // by time unless said
  pins?: [string, boolean][];   // groups pinned (true) or not, where the user changed the default
}

// Past this many, a link's collapsed subtrees are left out (each costs a request to restore).
export const MAX_LINKED_SUBTREES = 500;

const isCount = (text: string) => /^\d+$/.test(text);

export function selectionText(selection: SelectionRef): string {
  if (!selection) return '';
  return selection.kind === 'span' ? `span:${selection.lane}:${selection.depth}:${selection.index}` : `${selection.kind}:${selection.index}`;
}

export function parseSelection(text: string): SelectionRef {
  const parts = text.split(':');
  if (parts[0] === 'task' && parts.length === 2 && isCount(parts[1])) return { kind: 'task', index: Number(parts[1]) };
  if (parts[0] === 'counter' && parts.length === 2 && isCount(parts[1])) return { kind: 'counter', index: Number(parts[1]) };
  if (parts[0] === 'span' && parts.length === 4 && parts.slice(1).every(isCount))
    return { kind: 'span', lane: Number(parts[1]), depth: Number(parts[2]), index: Number(parts[3]) };
  return null;
}

function pair(fields: URLSearchParams, first: string, second: string) {
  const begin = Number(fields.get(first)), end = Number(fields.get(second));
  if (!fields.has(first) || !fields.has(second) || !Number.isFinite(begin) || !Number.isFinite(end) || end <= begin) return undefined;
  return { begin, end };
}

const GROUP_KEY = /^\d+(\/(threads|tasks|counters|monitor))?$/;

// "0/threads,1" -> ["process:0/threads", "process:1"]: well-formed keys, each once, sorted.
export function parseGroups(text: string): string[] {
  return [...new Set(text.split(',').filter(key => GROUP_KEY.test(key)))].sort().map(key => `process:${key}`);
}
export function groupsText(groups: Iterable<string>): string {
  return [...groups].map(key => key.replace(/^process:/, '')).filter(key => GROUP_KEY.test(key)).sort().join(',');
}

// "0/counters,-0/threads" -> [["process:0/counters", true], ["process:0/threads", false]]: well-formed
// group keys, the last word on each kept, sorted.
export function parsePins(text: string): [string, boolean][] {
  const pins = new Map<string, boolean>();
  for (const item of text.split(',')) {
    const key = item.replace(/^-/, '');
    if (GROUP_KEY.test(key) && key.includes('/')) pins.set(`process:${key}`, !item.startsWith('-'));
  }
  return [...pins].sort((a, b) => a[0].localeCompare(b[0]));
}
export function pinsText(pins: [string, boolean][]): string {
  const item = ([key, pinned]: [string, boolean]) => `${pinned ? '' : '-'}${key.replace(/^process:/, '')}`;
  return parsePins(pins.map(item).join(',')).map(item).join(',');  // only well-formed keys, sorted
}

// "12,40" -> [12, 40]: task indexes, each once, in order, at most MAX_LINKED_SUBTREES.
export function parseSubtrees(text: string): number[] {
  const indexes = text.split(',').filter(isCount).map(Number).filter(Number.isSafeInteger);
  return [...new Set(indexes)].sort((a, b) => a - b).slice(0, MAX_LINKED_SUBTREES);
}

export function readUrlState(hash = location.hash): UrlState {
  const fields = new URLSearchParams(hash.replace(/^#/, ''));
  const state: UrlState = { window: pair(fields, 't0', 't1'), range: pair(fields, 'r0', 'r1') };
  const selection = parseSelection(fields.get('sel') ?? '');
  if (selection) state.selection = selection;
  // A link with `cg` says every collapsed group (none when empty); without it, the trace's defaults.
  if (fields.has('cg')) state.groups = parseGroups(fields.get('cg') ?? '');
  const subtrees = parseSubtrees(fields.get('ct') ?? '');
  if (subtrees.length) state.subtrees = subtrees;
  if (fields.get('to') === 'tree') state.taskOrder = 'tree';
  const pins = parsePins(fields.get('pin') ?? '');
  if (pins.length) state.pins = pins;
  return state;
}

export function urlFragment(state: UrlState): string {
  const fields: string[] = [];
  if (state.window) fields.push(`t0=${Math.round(state.window.begin)}`, `t1=${Math.round(state.window.end)}`);
  if (state.selection) fields.push(`sel=${selectionText(state.selection)}`);
  if (state.range) fields.push(`r0=${Math.round(state.range.begin)}`, `r1=${Math.round(state.range.end)}`);
  const groups = groupsText(state.groups ?? []);
  if (groups || (state.groups && state.defaultGroups?.length)) fields.push(`cg=${groups}`);
  if (state.subtrees?.length) fields.push(`ct=${[...state.subtrees].sort((a, b) => a - b).join(',')}`);
  if (state.taskOrder === 'tree') fields.push('to=tree');
  const pins = pinsText(state.pins ?? []);
  if (pins) fields.push(`pin=${pins}`);
  return fields.length ? `#${fields.join('&')}` : '';
}

// Called on every frame; the URL is rewritten at most every 100 ms, and only when it changes.
let pending: UrlState | null = null;
let timer: number | undefined;
export function writeUrlState(state: UrlState) {
  pending = state;
  if (timer !== undefined) return;
  timer = window.setTimeout(() => {
    timer = undefined;
    const fragment = urlFragment(pending!);
    if (fragment !== location.hash && !(fragment === '' && location.hash === '#')) {
      history.replaceState(history.state, '', `${location.pathname}${location.search}${fragment}`);
    }
    publishUrl(fragment);
  }, 100);
}
