// The side-by-side table of docs/performance-log.md ("Viewer performance") from what run.sh kept:
// SIZE.run.json (generation, disk, load), SIZE.view.json (measure.mjs), SIZE.speedscope.json
// (speedscope.mjs), for the sizes found, in the order 1m, 10m, 100m, 1b.
//
//   node report.mjs RESULTS_DIR
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const directory = process.argv[2];
if (!directory) throw new Error('usage: report.mjs RESULTS_DIR');
const read = (size, what) => {
  const path = join(directory, `${size}.${what}.json`);
  return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : null;
};
const sizes = ['1m', '10m', '100m', '1b'].filter(size => read(size, 'run') || read(size, 'view'));
const columns = sizes.map(size => ({ size, run: read(size, 'run'), view: read(size, 'view'), speedscope: read(size, 'speedscope') }));

const mib = bytes => `${(bytes / 1048576).toLocaleString('en', { maximumFractionDigits: 1, minimumFractionDigits: 1 })} MiB`;
const seconds = value => `${value.toFixed(value < 10 ? 2 : 1)} s`;
const ms = value => value.toFixed(value < 10 ? 1 : 0);
const ratio = (bytes, column) => `${(bytes / column.view.traceBytes).toFixed(2)} ×`;
const rows = [];
const row = (label, cell) => rows.push(`| ${label} | ${columns.map(column => {
  try { return cell(column) ?? '–'; } catch { return '–'; }
}).join(' | ')} |`);
const open = (column, index) => column.view?.opens[index];
const failedOr = (column, index, cell) => {
  const which = open(column, index);
  if (!which) return undefined;
  return which.failed ? `**failed**: ${which.failed}` : cell(which);
};

row('events', column => column.view.events.toLocaleString('en'));
row('trace on disk', column => mib(column.view.traceBytes));
row('tasks / threads', column => `${column.view.summary.tasks.toLocaleString('en')} / ${column.view.summary.threads}`);
row('generating it (`chronicle record` of timeline_demo; events discarded)', column => `${seconds(column.run.generateSeconds)} (${column.run.discarded})`);
row('index written beside the trace by the first open', column => mib(column.view.indexBytes));
const opens = (label, index) => {
  row(`**${label}**: start to serving`, column => failedOr(column, index, o => `**${seconds(o.seconds)}** (${(column.view.events / o.seconds / 1e6).toFixed(1)} M events/s; CPU ${seconds(o.cpuSeconds)})`));
  if (index === 0) row(`${label}: the index kept beside the trace (served meanwhile)`, column => failedOr(column, index, o => (o.keptSeconds ?? null) === null ? 'before serving' : `${seconds(o.keptSeconds)} after start`));
  row(`${label}: server peak RSS (VmHWM)`, column => failedOr(column, index, o => `${mib(o.afterRequests.peak)} (${ratio(o.afterRequests.peak, column)})`));
  row(`${label}: server RSS once serving (anonymous)`, column => failedOr(column, index, o => `${mib(o.opened.rss)} (${ratio(o.opened.rss, column)}; ${mib(o.opened.anon)})`));
  row(`${label}: server RSS after the window requests (anonymous)`, column => failedOr(column, index, o => `${mib(o.afterRequests.rss)} (${ratio(o.afterRequests.rss, column)}; ${mib(o.afterRequests.anon)})`));
  row(`${label}: window answers, median / max over all zooms and pans`, column => failedOr(column, index, o => `**${ms(o.window.median)} / ${ms(o.window.max)} ms**`));
};
opens('first open', 0);
opens('reopen', 1);
if (columns.some(column => column.view?.opens[2])) opens('reopen, cold page cache', 2);
row('our page in Chromium: navigation to the first frame', column => seconds(open(column, 0).browser.loadSeconds));
row('our page in Chromium: Chromium\'s memory, peak PSS (page JS heap)', column => {
  const browser = open(column, 0).browser;
  return `${mib(browser.browserPeak)} (${mib(browser.jsHeap)})`;
});
if (columns.some(column => open(column, 0)?.browser?.keys))
  row('our page in Chromium (--keys): key press to new frame; fetch; drawing, median / max ms', column => {
    const { key, fetch, render } = open(column, 0).browser.keys;
    return [key, fetch, render].map(pair => pair.map(ms).join(' / ')).join('; ');
  });
row('Chrome JSON export: time, size', column => column.run.exportSeconds === null ? undefined : `${seconds(column.run.exportSeconds)}, ${mib(column.run.jsonBytes)}`);
row('speedscope in Chromium: navigation to the profile drawn', column => {
  const result = column.speedscope;
  if (!result) return undefined;
  return result.outcome === 'drawn' ? seconds(result.seconds) : `**${result.outcome}** (after ${seconds(result.seconds)}${result.failures.length ? `: ${result.failures.join('; ')}` : ''})`;
});
row('speedscope: Chromium\'s memory, peak PSS (page JS heap)', column => column.speedscope && `${mib(column.speedscope.browserPeak)} (${column.speedscope.jsHeap === null ? '?' : mib(column.speedscope.jsHeap)})`);
row('disk used at most (trace, index, JSON)', column => mib(column.run.diskBytes));
row('load average (1, 5, 15 min) before / after measuring', column => `${column.run.loadBefore} / ${column.run.loadAfter}`);

console.log(`| | ${columns.map(column => column.size.replace('m', ' M').replace('1b', '1 B')).join(' | ')} |`);
console.log(`| --- |${columns.map(() => ' ---: |').join('')}`);
rows.forEach(line => console.log(line));

console.log('\nWindow answers per zoom level, first open / reopen (median / max ms, largest answer):\n');
console.log(`| window | ${columns.map(column => column.size).join(' | ')} |`);
console.log(`| --- |${columns.map(() => ' --- |').join('')}`);
const factors = [1, 10, 100, 1000, 10000, 100000, 1000000];
for (const [i, factor] of factors.entries()) {
  const cells = columns.map(column => {
    const [first, again] = [open(column, 0), open(column, 1)];
    if (!first?.window) return '–';
    const level = first.window.levels[i];
    const reopened = again?.window?.levels[i];
    return `${ms(level.median)} / ${ms(level.max)}${reopened ? `; ${ms(reopened.median)} / ${ms(reopened.max)}` : ''}, ${(level.bytes / 1024).toFixed(0)} KiB`;
  });
  console.log(`| ${factor === 1 ? 'the whole trace' : `1/${factor.toLocaleString('en')}`} | ${cells.join(' | ')} |`);
}
{
  const cells = columns.map(column => {
    const [first, again] = [open(column, 0), open(column, 1)];
    const level = first?.window?.oneMs;
    if (!level) return '–';
    const reopened = again?.window?.oneMs;
    return `${ms(level.median)} / ${ms(level.max)}${reopened ? `; ${ms(reopened.median)} / ${ms(reopened.max)}` : ''}, ${(level.bytes / 1024).toFixed(0)} KiB`;
  });
  console.log(`| 1 ms | ${cells.join(' | ')} |`);
}
for (const what of ['search "job 2.77"', 'range stats, 1/1000 of the trace', 'range stats, the whole trace', 'task details']) {
  const cells = columns.map(column => {
    const request = open(column, 0)?.requests?.find(r => r.what === what);
    return request ? ms(request.ms) : '–';
  });
  console.log(`| ${what} | ${cells.join(' | ')} |`);
}
