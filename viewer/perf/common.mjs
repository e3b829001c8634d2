// What measure.mjs (our viewer) and speedscope.mjs (the third-party comparison) share: process
// memory from /proc, a sampler of a process tree's memory while something loads, dropping a
// trace's pages from the page cache, and Debian's Chromium through playwright-core.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';

export const mib = bytes => (bytes / 1048576).toFixed(1);

export function pathBytes(path) {
  const info = statSync(path);
  if (!info.isDirectory()) return info.size;
  let total = 0;
  for (const entry of readdirSync(path)) total += pathBytes(join(path, entry));
  return total;
}

// The trace and whatever `chronicle view` may keep beside it (an index cache named after the
// trace, e.g. TRACE.index, or files inside the trace's directory): the measure of "on disk".
export function besideTrace(trace) {
  const parent = dirname(trace), name = basename(trace);
  return readdirSync(parent).filter(entry => entry.startsWith(`${name}.`)).map(entry => join(parent, entry));
}

function statusField(status, name) {
  const match = status.match(new RegExp(`${name}:\\s+(\\d+) kB`));
  return match ? Number(match[1]) * 1024 : 0;
}

// RSS, its anonymous part (heap: what the process built, not mapped files), and the kernel's
// high-water mark of RSS (VmHWM). null once the process is gone.
export function processMemory(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return { rss: statusField(status, 'VmRSS'), anon: statusField(status, 'RssAnon'), peak: statusField(status, 'VmHWM') };
  } catch {
    return null;
  }
}

// User and system CPU time the process has used so far, in seconds (on a shared machine, what
// the open cost as against how long it took).
export function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;  // utime, stime in USER_HZ (100 on Linux)
  } catch {
    return null;
  }
}

function parentOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

// Every descendant of `root` (Chromium's browser, renderer, GPU and utility processes are all
// children of the node process that launched them), but not the pids in `exclude` nor theirs.
export function descendants(root, exclude = []) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const parent = parentOf(Number(entry));
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(Number(entry));
  }
  const found = [];
  const walk = pid => {
    for (const child of children.get(pid) ?? []) {
      if (exclude.includes(child)) continue;
      found.push(child);
      walk(child);
    }
  };
  walk(root);
  return found;
}

// Proportional set size: a shared page counts once across the processes, so the sum over
// Chromium's processes is what they cost together (a sum of RSS would count shared libraries
// once per process).
function proportionalSize(pid) {
  try {
    return statusField(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'), 'Pss');
  } catch {
    return 0;
  }
}

export function treeMemory(root, exclude) {
  return descendants(root, exclude).reduce((sum, pid) => sum + proportionalSize(pid), 0);
}

// Samples treeMemory every `everyMs` until stopped; returns the largest and the last sample.
export function sampleTreeMemory(root, exclude, everyMs = 250) {
  let peak = 0, last = 0;
  const sample = () => {
    last = treeMemory(root, exclude);
    peak = Math.max(peak, last);
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return { stop() { clearInterval(timer); sample(); return { peak, last }; } };
}

// Drops the files' pages from the page cache (posix_fadvise DONTNEED, through Python since node
// has no binding): a "cold" open then reads the trace, or its index, from the disk. Only these
// files are dropped, not the machine's whole cache.
export function dropFromPageCache(paths) {
  const files = [];
  const walk = path => {
    if (!existsSync(path)) return;
    if (statSync(path).isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry));
    else files.push(path);
  };
  paths.forEach(walk);
  execFileSync('python3', ['-c', `
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
`, ...files]);
}

export async function launchChromium() {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'chronicle-viewer-perf-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium', headless: true, viewport: { width: 1600, height: 1000 },
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
           '--disable-sync', '--no-first-run'],
  });
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// The page's JavaScript heap as Chromium counts it (CDP Performance.getMetrics).
export async function javascriptHeap(page) {
  try {
    const session = await page.context().newCDPSession(page);
    await session.send('Performance.enable');
    const { metrics } = await session.send('Performance.getMetrics');
    return metrics.find(metric => metric.name === 'JSHeapUsedSize')?.value ?? null;
  } catch {
    return null;
  }
}

export const median = values => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
export const maximum = values => Math.max(...values);
