// The third-party side of the viewer benchmark: speedscope (npm, viewer/perf/package.json) opens
// a trace exported as Chrome JSON (`chronicle export --format chrome`), in Debian's Chromium
// (headless, playwright-core). Measures the time from navigation to the profile drawn (the page's
// title names the profile, the flame chart's canvases are in the page, the loading bar and the
// landing page are gone), Chromium's memory (PSS of all its processes, sampled, and the page's
// JavaScript heap), and whether it succeeds at all: an error page, an alert, a crashed tab or no
// profile within --timeout seconds is the result, reported as such.
//
//   node speedscope.mjs TRACE.json [--timeout 1800] [--json FILE] [--screenshot FILE.png]
import { createReadStream, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { javascriptHeap, launchChromium, mib, sampleTreeMemory } from './common.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const profilePath = args.find((arg, i) => !arg.startsWith('--') && !['--json', '--timeout', '--screenshot'].includes(args[i - 1]));
if (!profilePath) throw new Error('usage: speedscope.mjs TRACE.json [--timeout SECONDS] [--json FILE]');
const timeoutMs = Number(option('--timeout', 1800)) * 1000;
const release = join(dirname(fileURLToPath(import.meta.url)), 'node_modules/speedscope/dist/release');
if (!existsSync(join(release, 'index.html'))) throw new Error(`no speedscope in ${release}: run npm ci in viewer/perf`);

// speedscope's own files, and the profile at /profile.json (speedscope fetches #profileURL=).
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm' };
const server = createServer((request, response) => {
  const path = new URL(request.url, 'http://localhost').pathname;
  const file = path === '/profile.json' ? profilePath : join(release, path === '/' ? 'index.html' : path.slice(1));
  if (!file.startsWith(release) && file !== profilePath || !existsSync(file)) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size });
  createReadStream(file).pipe(response);
});
await new Promise(resolve => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}/`;

const browser = await launchChromium();
const page = await browser.context.newPage();
const failures = [];
page.on('dialog', dialog => { failures.push(`alert: ${dialog.message()}`); dialog.dismiss().catch(() => {}); });
page.on('crash', () => failures.push('the tab crashed'));
page.on('pageerror', error => failures.push(`page error: ${error.message}`));
// speedscope catches an import's failure and logs it ("Failed to load format", console.log)
// before it shows its error page.
page.on('console', message => {
  if (message.type() === 'error' || message.text().startsWith('Failed')) failures.push(`console: ${message.text().slice(0, 300)}`);
});
const crashed = new Promise(resolve => page.on('crash', resolve));
const memory = sampleTreeMemory(process.pid, []);
// A page busy in one long task answers no evaluation, and playwright's own timeouts wait on it:
// the limit is kept here, and nothing asks the page anything once it has failed.
const deadline = (ms, value) => new Promise(resolve => setTimeout(() => resolve(value), ms).unref());
const begin = performance.now();
let outcome, jsHeap = null, title = null;
try {
  await page.goto(`${base}index.html#profileURL=${encodeURIComponent(`${base}profile.json`)}`, { timeout: 120000 });
  const drawn = page.waitForFunction(() => {
    const text = document.body.innerText;
    if (text.includes('Something went wrong')) return 'error';
    const loaded = document.title.endsWith(' - speedscope') && document.querySelectorAll('canvas').length >= 3 && !text.includes('Drag and drop');
    return loaded ? 'drawn' : false;
  }, null, { timeout: 0, polling: 100 }).then(handle => handle.jsonValue());
  outcome = await Promise.race([drawn, crashed.then(() => 'crashed'), deadline(timeoutMs - (performance.now() - begin), `no profile drawn after ${timeoutMs / 1000} s`)]);
  if (outcome === 'drawn') {
    await page.evaluate(() => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    jsHeap = await javascriptHeap(page);
    title = await page.title();
    if (option('--screenshot')) await page.screenshot({ path: option('--screenshot') });
  }
} catch (error) {
  outcome = `failed: ${error.message.split('\n')[0]}`;
}
const seconds = (performance.now() - begin) / 1000;
const { peak, last } = memory.stop();
await Promise.race([browser.close(), deadline(30000)]);
server.close();

const result = { profile: profilePath, profileBytes: statSync(profilePath).size, outcome, seconds, browserPeak: peak, browserLast: last, jsHeap, title, failures };
console.log(`speedscope ${JSON.parse(readFileSync(join(release, '../../package.json'), 'utf8')).version} on ${profilePath} (${mib(result.profileBytes)} MiB): ${outcome} ` +
            `after ${seconds.toFixed(1)} s; Chromium's memory (PSS, all processes) peak ${mib(peak)} MiB, at the end ${mib(last)} MiB; ` +
            `page JS heap ${jsHeap === null ? '?' : `${mib(jsHeap)} MiB`}${title ? `; title "${title}"` : ''}`);
for (const failure of failures) console.log(`  ${failure}`);
const output = option('--json');
if (output) writeFileSync(output, JSON.stringify(result, null, 1));
// Playwright kills the browser it launched when node exits, even if closing it hung on a busy page.
process.exit(0);
