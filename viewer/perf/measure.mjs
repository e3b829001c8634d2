// Measures `chronicle view` on a trace: time until it serves (index built), the answer time of
// windows at zooms from the whole trace down to a millionth of it, of pans, search and stats,
// and the server's peak memory. Prints a Markdown table for docs/performance-viewer.md.
//
//   node measure.mjs CHRONICLE TRACE_DIR [WIDTH=1600]
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const [chronicle, trace, widthText] = process.argv.slice(2);
const width = Number(widthText ?? 1600);

function directoryBytes(path) {
  let total = 0;
  for (const entry of readdirSync(path)) {
    const full = join(path, entry);
    const info = statSync(full);
    total += info.isDirectory() ? directoryBytes(full) : info.size;
  }
  return total;
}

function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = name => Number(status.match(new RegExp(`${name}:\\s+(\\d+) kB`))[1]) * 1024;
  return { rss: field('VmRSS'), anon: field('RssAnon'), peak: field('VmHWM') };
}

const started = performance.now();
const server = spawn(chronicle, ['view', trace, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
let stderr = '';
server.stderr.on('data', chunk => { stderr += chunk; });
const base = await new Promise((resolve, reject) => {
  let output = '';
  server.stdout.on('data', chunk => {
    output += chunk;
    const url = output.match(/http:\/\/127\.0\.0\.1:\d+\//);
    if (url) resolve(url[0]);
  });
  server.on('exit', code => reject(new Error(`chronicle view exited (${code}): ${stderr}`)));
});
const openSeconds = (performance.now() - started) / 1000;

// The same in a browser: from `chronicle view` starting to the first frame drawn, then key
// presses (pan and zoom) until each new window is drawn.
const { chromium } = await import('playwright-core');
const { mkdtempSync, rmSync } = await import('node:fs');
const { tmpdir } = await import('node:os');
const profile = mkdtempSync(join(tmpdir(), 'chronicle-viewer-perf-'));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true, viewport: { width: 1600, height: 1000 },
  args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run'],
});
const page = await browser.newPage();
const pageStarted = performance.now();
const settled = () => page.waitForFunction(() => document.body.dataset.ready === 'true' && document.body.dataset.settled === 'true')
  .then(() => page.evaluate(() => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)))));
await page.goto(base);
await settled();
const firstFrameSeconds = (performance.now() - started) / 1000;
const pageSeconds = (performance.now() - pageStarted) / 1000;
const keyTimes = [], fetchTimes = [], renderTimes = [];
await page.mouse.move(800, 300);
for (const key of ['w', 'w', 'w', 'w', 'w', 'd', 'd', 'a', 's', 's', 'w', 'd']) {
  const begin = performance.now();
  await page.keyboard.press(key);
  await settled();
  keyTimes.push(performance.now() - begin);
  fetchTimes.push(Number(await page.evaluate(() => document.body.dataset.fetchMs)));
  renderTimes.push(Number(await page.evaluate(() => document.body.dataset.renderMs)));
}
await browser.close();
rmSync(profile, { recursive: true, force: true });

async function timed(path) {
  const begin = performance.now();
  const response = await fetch(base + path);
  const body = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${body}`);
  return { ms: performance.now() - begin, bytes: body.length, body };
}

const summary = JSON.parse((await timed('api/summary')).body);
const duration = summary.duration;
const rows = [];
const stats = times => {
  const sorted = [...times].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1] };
};
// Zoom levels: the window is duration / factor, at 9 places across the trace; then pans of a
// tenth of the window from there. The task rows asked for are a screen's, as the page asks
// (a row per task: without `rows` the answer would hold every task alive in the window).
const taskRows = '&rows=0-112';
for (const factor of [1, 10, 100, 1000, 10000, 100000, 1000000]) {
  const length = duration / factor;
  const times = [];
  let bytes = 0;
  for (let place = 0; place < 9; ++place) {
    const begin = Math.max(0, (duration - length) * (place / 8));
    const answer = await timed(`api/window?begin=${Math.floor(begin)}&end=${Math.ceil(begin + length)}&width=${width}${taskRows}`);
    times.push(answer.ms);
    bytes = Math.max(bytes, answer.bytes);
    for (let step = 1; step <= 3; ++step) {
      const panned = begin + (length / 10) * step;
      times.push((await timed(`api/window?begin=${Math.floor(panned)}&end=${Math.ceil(panned + length)}&width=${width}${taskRows}`)).ms);
    }
  }
  rows.push({ what: `window 1/${factor} of the trace (${width} px), zooms and pans`, ...stats(times), bytes });
}
const search = await timed('api/search?q=job%202.77');
rows.push({ what: 'search "job 2.77"', median: search.ms, max: search.ms, bytes: search.bytes });
const small = await timed(`api/stats?begin=${Math.floor(duration / 2)}&end=${Math.floor(duration / 2 + duration / 1000)}`);
rows.push({ what: 'range stats, 1/1000 of the trace', median: small.ms, max: small.ms, bytes: small.bytes });
const whole = await timed(`api/stats?begin=0&end=${duration}`);
rows.push({ what: 'range stats, the whole trace', median: whole.ms, max: whole.ms, bytes: whole.bytes });
const task = await timed(`api/task?index=${Math.floor(summary.tasks / 2)}`);
rows.push({ what: 'task details', median: task.ms, max: task.ms, bytes: task.bytes });

const { rss, anon, peak } = memory(server.pid);
const traceBytes = directoryBytes(trace);
server.kill('SIGTERM');

const mib = bytes => (bytes / 1048576).toFixed(1);
console.log(`trace: ${trace}: ${summary.events.toLocaleString('en')} events, ${mib(traceBytes)} MiB on disk, ${summary.tasks.toLocaleString('en')} tasks, ${summary.lanes.length} threads`);
console.log(`${stderr.trim().split('\n').filter(l => l.includes('indexed')).join(' ')}`);
console.log(`open (start to serving): ${openSeconds.toFixed(2)} s; to the first frame in Chromium: ${firstFrameSeconds.toFixed(2)} s ` +
            `(of which loading the page and its first window: ${pageSeconds.toFixed(2)} s; the rest is starting Chromium)`);
for (const times of [keyTimes, fetchTimes, renderTimes]) times.sort((a, b) => a - b);
console.log(`in Chromium, fetching a window: median ${fetchTimes[Math.floor(fetchTimes.length / 2)].toFixed(0)} ms, max ${fetchTimes[fetchTimes.length - 1].toFixed(0)} ms; ` +
            `drawing it: median ${renderTimes[Math.floor(renderTimes.length / 2)].toFixed(0)} ms, max ${renderTimes[renderTimes.length - 1].toFixed(0)} ms`);
console.log(`in Chromium, a key press (W/A/S/D) to the new window drawn: median ${keyTimes[Math.floor(keyTimes.length / 2)].toFixed(0)} ms, max ${keyTimes[keyTimes.length - 1].toFixed(0)} ms (includes the page's 16 ms debounce)`);
console.log(`server memory after the requests: RSS ${mib(rss)} MiB (${(rss / traceBytes).toFixed(2)} x the trace; ${mib(anon)} MiB of it anonymous); ` +
            `peak RSS ${mib(peak)} MiB (${(peak / traceBytes).toFixed(2)} x; it counts the trace's mapped file pages while indexing)`);
console.log('\n| request | median ms | max ms | largest answer |\n| --- | ---: | ---: | ---: |');
for (const row of rows) console.log(`| ${row.what} | ${row.median.toFixed(1)} | ${row.max.toFixed(1)} | ${(row.bytes / 1024).toFixed(1)} KiB |`);
