// Measures `chronicle view` on a trace (issue 14's figures, docs/performance-log.md "Viewer
// performance"):
// - first open: from starting `chronicle view TRACE --port 0` until it serves, events/s, the
//   server's peak RSS (VmHWM), its RSS and anonymous RSS once serving and after the requests, and
//   when it had kept the index it serves meanwhile;
// - windows: GET /api/window at zooms from the whole trace to a millionth of it, 9 places and 3
//   pans each, median and max per zoom, and 1 ms windows likewise; search, range stats and task
//   details;
// - reopen: the server stopped and started again on the same trace, the same measures (with an
//   index cache the second open reuses what the first wrote beside the trace: its bytes on disk
//   are reported; without one it builds again; nothing here assumes either), and with --cold a
//   third open after the trace's and the index's pages are dropped from the page cache;
// - with --browser: the page in Chromium (headless, playwright-core), from navigation to the
//   first frame drawn, and Chromium's memory; with --keys also W/A/S/D presses to a new frame.
// Prints the figures and, with --json FILE, writes them for report.mjs.
//
// Windows ask for a screen of task rows by time, as the page does first; --tree asks for them as
// the tree.
//
//   node measure.mjs CHRONICLE TRACE [--browser] [--keys] [--cold] [--tree] [--json FILE] [--width 1600]
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import {
  besideTrace, cpuSeconds, dropFromPageCache, javascriptHeap, launchChromium, maximum, median, mib, pathBytes, processMemory,
  sampleTreeMemory,
} from './common.mjs';

const args = process.argv.slice(2);
const flag = name => args.includes(name);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const [chronicle, trace] = args.filter((arg, i) => !arg.startsWith('--') && !['--json', '--width'].includes(args[i - 1]));
if (!trace) throw new Error('usage: measure.mjs CHRONICLE TRACE [--browser] [--keys] [--cold] [--tree] [--json FILE] [--width N]');
const width = Number(option('--width', 1600));
const taskRows = flag('--tree') ? 'rows=0-112' : 'rows=0-112&by=time';
const withKeys = flag('--keys');
const withBrowser = withKeys || flag('--browser');

// Starts `chronicle view` and waits until it prints its address. The peak is sampled while it
// indexes as well, so that a server that dies (out of memory) still reports how far it got.
async function openServer() {
  const started = performance.now();
  const server = spawn(chronicle, ['view', trace, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The anonymous part's peak is sampled too: what the kernel cannot take back short of killing
  // the server, unlike the pages of mapped files (the trace, the index, the arrays held in files
  // while indexing), which it writes out or drops when it needs the memory.
  let stderr = '', peak = 0, anonPeak = 0;
  const sampler = setInterval(() => {
    const memory = processMemory(server.pid);
    peak = Math.max(peak, memory?.peak ?? 0);
    anonPeak = Math.max(anonPeak, memory?.anon ?? 0);
  }, 100);
  // A server serves the index it built at once and keeps it beside the trace meanwhile: when it
  // says it kept it.
  let keptSeconds = null;
  server.stderr.on('data', chunk => {
    stderr += chunk;
    if (keptSeconds === null && stderr.includes('chronicle: kept the index')) keptSeconds = (performance.now() - started) / 1000;
  });
  const exited = new Promise(resolve => server.on('exit', (code, signal) => resolve({ code, signal })));
  const base = await new Promise(resolve => {
    let output = '';
    server.stdout.on('data', chunk => {
      output += chunk;
      const url = output.match(/http:\/\/127\.0\.0\.1:\d+\//);
      if (url) resolve(url[0]);
    });
    exited.then(() => resolve(null));
  });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const serving = processMemory(server.pid);
  const cpu = cpuSeconds(server.pid);
  const messages = () => stderr.trim().split('\n').filter(line => line.length > 0);
  if (!base) {
    const { code, signal } = await exited;
    return { failed: `chronicle view exited (${signal ?? `status ${code}`}) after ${seconds.toFixed(1)} s`, seconds, peak, anonPeak, messages: messages() };
  }
  return {
    base, seconds, cpu, messages, pid: server.pid, memoryNow: () => processMemory(server.pid), kept: () => keptSeconds,
    serving: { ...serving, peak: Math.max(peak, serving.peak), anonPeak: Math.max(anonPeak, serving.anon) },
    async stop() { if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM'); await exited; },
  };
}

async function get(base, path) {
  const begin = performance.now();
  const response = await fetch(base + path);
  const body = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${body}`);
  return { ms: performance.now() - begin, bytes: body.length, body };
}

// Zoom levels: the window is duration / factor, at 9 places across the trace; then pans of a
// tenth of the window from there. The task rows asked for are a screen's, as the page asks.
async function windows(base, duration) {
  const levels = [];
  for (const factor of [1, 10, 100, 1000, 10000, 100000, 1000000]) {
    const length = duration / factor, times = [];
    let bytes = 0;
    for (let place = 0; place < 9; ++place) {
      const first = Math.max(0, (duration - length) * (place / 8));
      for (let step = 0; step <= 3; ++step) {
        const begin = first + (length / 10) * step;
        const answer = await get(base, `api/window?begin=${Math.floor(begin)}&end=${Math.ceil(begin + length)}&width=${width}&${taskRows}`);
        times.push(answer.ms);
        bytes = Math.max(bytes, answer.bytes);
      }
    }
    levels.push({ factor, median: median(times), max: maximum(times), bytes, times });
  }
  const all = levels.flatMap(level => level.times);
  // Issue 45's "1 ms window": a millisecond of the trace at the same 9 places and 4 pans.
  const oneMs = { times: [], bytes: 0 };
  const length = Math.min(1e6, duration);
  for (let place = 0; place < 9; ++place)
    for (let step = 0; step <= 3; ++step) {
      const begin = Math.max(0, (duration - length) * (place / 8)) + (length / 10) * step;
      const answer = await get(base, `api/window?begin=${Math.floor(begin)}&end=${Math.ceil(begin + length)}&width=${width}&${taskRows}`);
      oneMs.times.push(answer.ms);
      oneMs.bytes = Math.max(oneMs.bytes, answer.bytes);
    }
  return { levels: levels.map(({ times, ...level }) => level), median: median(all), max: maximum(all),
           oneMs: { median: median(oneMs.times), max: maximum(oneMs.times), bytes: oneMs.bytes } };
}

async function otherRequests(base, summary) {
  const { duration } = summary;
  const timedOnce = async (what, path) => {
    const answer = await get(base, path);
    return { what, ms: answer.ms, bytes: answer.bytes };
  };
  return [
    await timedOnce('search "job 2.77"', 'api/search?q=job%202.77'),
    await timedOnce('range stats, 1/1000 of the trace', `api/stats?begin=${Math.floor(duration / 2)}&end=${Math.floor(duration / 2 + duration / 1000)}`),
    await timedOnce('range stats, the whole trace', `api/stats?begin=0&end=${duration}`),
    await timedOnce('task details', `api/task?index=${Math.floor(summary.tasks / 2)}`),
  ];
}

// The page in Chromium: navigation to the first frame drawn (the page sets data-ready and
// data-settled once its first window is drawn), Chromium's memory (PSS of all its processes,
// sampled; and the page's JavaScript heap), and optionally key presses.
async function inBrowser(base, serverPid) {
  const browser = await launchChromium();
  const page = await browser.context.newPage();
  const settled = () => page.waitForFunction(() => document.body.dataset.ready === 'true' && document.body.dataset.settled === 'true', null, { timeout: 600000 })
    .then(() => page.evaluate(() => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)))));
  const memory = sampleTreeMemory(process.pid, [serverPid]);
  const begin = performance.now();
  await page.goto(base);
  await settled();
  const result = { loadSeconds: (performance.now() - begin) / 1000, jsHeap: await javascriptHeap(page) };
  if (withKeys) {
    const keyTimes = [], fetchTimes = [], renderTimes = [];
    await page.mouse.move(800, 300);
    for (const key of ['w', 'w', 'w', 'w', 'w', 'd', 'd', 'a', 's', 's', 'w', 'd']) {
      const pressed = performance.now();
      await page.keyboard.press(key);
      await settled();
      keyTimes.push(performance.now() - pressed);
      fetchTimes.push(Number(await page.evaluate(() => document.body.dataset.fetchMs)));
      renderTimes.push(Number(await page.evaluate(() => document.body.dataset.renderMs)));
    }
    result.keys = { key: [median(keyTimes), maximum(keyTimes)], fetch: [median(fetchTimes), maximum(fetchTimes)], render: [median(renderTimes), maximum(renderTimes)] };
  }
  const { peak, last } = memory.stop();
  await browser.close();
  return { ...result, browserPeak: peak, browserLast: last };
}

// One open of the trace and its measures; `extra` adds the requests done only once.
async function measureOpen(label, extra) {
  const server = await openServer();
  if (server.failed) return { label, failed: server.failed, seconds: server.seconds, peak: server.peak, messages: server.messages };
  try {
    const summary = JSON.parse((await get(server.base, 'api/summary')).body);
    const opened = server.serving;
    const window = await windows(server.base, summary.duration);
    const result = { label, seconds: server.seconds, cpuSeconds: server.cpu, opened, window, summary };
    if (extra) {
      result.requests = await otherRequests(server.base, summary);
      if (withBrowser) result.browser = await inBrowser(server.base, server.pid);
    }
    result.afterRequests = server.memoryNow();
    await server.stop();  // a server still keeping the index finishes it first
    result.messages = server.messages();
    result.keptSeconds = server.kept();
    return result;
  } finally {
    await server.stop();
  }
}

const traceBytes = pathBytes(trace);
const besideBefore = besideTrace(trace);
const opens = [];
opens.push(await measureOpen('first open', true));
const besideBytes = besideTrace(trace).filter(path => !besideBefore.includes(path)).reduce((sum, path) => sum + pathBytes(path), 0);
const indexBytes = pathBytes(trace) - traceBytes + besideBytes;
opens.push(await measureOpen('reopen', false));
if (flag('--cold')) {
  dropFromPageCache([trace, ...besideTrace(trace)]);
  opens.push(await measureOpen('reopen, cold page cache', false));
}

const first = opens[0];
const summary = first.summary ?? opens.find(open => open.summary)?.summary;
const events = summary?.events ?? 0;
console.log(`trace: ${trace}: ${events.toLocaleString('en')} events, ${mib(traceBytes)} MiB on disk` +
            (summary ? `, ${summary.tasks.toLocaleString('en')} tasks, ${summary.lanes.length} threads` : ''));
console.log(`written beside or into the trace by the first open (an index cache): ${mib(indexBytes)} MiB`);
for (const open of opens) {
  console.log(`\n${open.label}:`);
  for (const line of open.messages) console.log(`  stderr: ${line}`);
  if (open.failed) {
    console.log(`  FAILED: ${open.failed}; peak RSS so far ${mib(open.peak)} MiB, anonymous ${mib(open.anonPeak ?? 0)} MiB`);
    continue;
  }
  const ratio = bytes => `${(bytes / traceBytes).toFixed(2)} x the trace`;
  console.log(`  start to serving: ${open.seconds.toFixed(2)} s (${(events / open.seconds / 1e6).toFixed(1)} M events/s); ` +
              `the server's CPU time by then ${open.cpuSeconds.toFixed(2)} s` +
              (open.keptSeconds !== null ? `; the index kept beside the trace ${open.keptSeconds.toFixed(2)} s after start, served meanwhile` : ''));
  console.log(`  server once serving: RSS ${mib(open.opened.rss)} MiB (${ratio(open.opened.rss)}), anonymous ${mib(open.opened.anon)} MiB; ` +
              `peak RSS while opening ${mib(open.opened.peak)} MiB (${ratio(open.opened.peak)}), ` +
              `of which anonymous at most ${mib(open.opened.anonPeak ?? 0)} MiB (${ratio(open.opened.anonPeak ?? 0)}, sampled every 0.1 s)`);
  console.log(`  server after the requests: RSS ${mib(open.afterRequests.rss)} MiB (${ratio(open.afterRequests.rss)}), anonymous ${mib(open.afterRequests.anon)} MiB; ` +
              `peak RSS ${mib(open.afterRequests.peak)} MiB`);
  console.log(`  window answers, all zooms and pans: median ${open.window.median.toFixed(1)} ms, max ${open.window.max.toFixed(1)} ms`);
  console.log('\n  | window (1600 px, 9 places x 4) | median ms | max ms | largest answer |\n  | --- | ---: | ---: | ---: |');
  for (const level of open.window.levels)
    console.log(`  | 1/${level.factor.toLocaleString('en')} of the trace | ${level.median.toFixed(1)} | ${level.max.toFixed(1)} | ${(level.bytes / 1024).toFixed(1)} KiB |`);
  const oneMs = open.window.oneMs;
  console.log(`  | 1 ms of the trace | ${oneMs.median.toFixed(1)} | ${oneMs.max.toFixed(1)} | ${(oneMs.bytes / 1024).toFixed(1)} KiB |`);
  for (const request of open.requests ?? [])
    console.log(`  | ${request.what} | ${request.ms.toFixed(1)} | | ${(request.bytes / 1024).toFixed(1)} KiB |`);
  if (open.browser) {
    const b = open.browser;
    console.log(`  Chromium: navigation to the first frame ${b.loadSeconds.toFixed(2)} s; Chromium's memory (PSS, all processes) peak ${mib(b.browserPeak)} MiB, ` +
                `at the end ${mib(b.browserLast)} MiB; page JS heap ${b.jsHeap === null ? '?' : mib(b.jsHeap)} MiB`);
    if (b.keys)
      console.log(`  Chromium: key press to new frame median/max ${b.keys.key.map(v => v.toFixed(0)).join(' / ')} ms; ` +
                  `fetch ${b.keys.fetch.map(v => v.toFixed(0)).join(' / ')} ms; drawing ${b.keys.render.map(v => v.toFixed(0)).join(' / ')} ms`);
  }
}
const output = option('--json');
if (output) writeFileSync(output, JSON.stringify({ trace, traceBytes, indexBytes, events, summary: summary && { tasks: summary.tasks, threads: summary.lanes.length }, opens }, null, 1));
