// One level of detail: a self-contained page (`view --html`) computes its windows itself (it has
// no server), and they must be the server's `/api/window` answers for the same window: the same
// spans drawn alone, the same busy blocks, runs merged alike, the same arrows and messages merged
// per pixel, counters downsampled alike, the same caps. Records each program (and, given the echo
// example, a server and a client merged), asks `chronicle view` for windows at several zooms,
// task row ranges, collapsed subtrees and the tasks by time, and compares with the page's own answers (its
// src/local.ts bundled by esbuild, run in node on the data `view --html` embedded). The page
// embeds no stack samples: the server's `samples` must be empty here.
//   node html_windows.check.mjs CHRONICLE VIEWER_DIR PROGRAM...
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import assert from 'node:assert/strict';

const [chronicle, viewerDir, ...programs] = process.argv.slice(2).map((path) => resolve(path));
const work = mkdtempSync(join(tmpdir(), 'chronicle-html-windows-'));
let server;
// Over every trace: spans alone, busy blocks, downsampled counters and messages were compared. (Merged arrows are not
// in these traces: their rule is compared only where it merges nothing.)
const seen = { items: 0, blocks: 0, downsampled: 0, mergedArrows: 0, messages: 0, mergedMessages: 0, taskBlocks: 0 };
try {
  const esbuild = createRequire(join(viewerDir, 'package.json'))('esbuild');
  const bundle = join(work, 'local.mjs');
  await esbuild.build({ entryPoints: [join(viewerDir, 'src', 'local.ts')], bundle: true, format: 'esm', outfile: bundle, logLevel: 'warning' });
  const { LocalBackend } = await import(pathToFileURL(bundle).href);
  for (const [number, program] of programs.entries()) {
    const trace = join(work, `trace-${number}`);
    execFileSync(chronicle, ['record', '-o', trace, '--', program], { stdio: ['ignore', 'ignore', 'inherit'] });
    await compare(LocalBackend, trace, program);
  }
  // Two processes on one timeline, with messages between them: the echo example as a server and
  // a client, recorded apart and merged (as tests/viewer_test.cpp's ViewerProcesses).
  const echo = programs.find((program) => basename(program) === 'echo_example');
  if (echo) await compare(LocalBackend, await recordTwoEchoProcesses(echo), 'two echo processes, merged');
  assert.ok(seen.items > 0 && seen.blocks > 0, `spans drawn alone (${seen.items}) and busy blocks (${seen.blocks}) were compared`);
  assert.ok(seen.mergedMessages > 0, `messages merged per pixel were compared (${seen.mergedMessages} of ${seen.messages})`);
  assert.ok(seen.downsampled > 0, `downsampled counters were compared (${seen.downsampled})`);
  assert.ok(seen.taskBlocks > 0, `tasks by time merged into blocks were compared (${seen.taskBlocks})`);
} finally {
  server?.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}

// Where two answers first differ, as a path and the two values, so that a failure says what.
function firstDifference(served, computed, path = '') {
  if (typeof served !== 'object' || served === null || typeof computed !== 'object' || computed === null)
    return Object.is(served, computed) ? null : `${path}: server ${JSON.stringify(served)}, page ${JSON.stringify(computed)}`;
  const keys = new Set([...Object.keys(served), ...Object.keys(computed)]);
  for (const key of keys) {
    if (!(key in computed)) return `${path}.${key}: server ${JSON.stringify(served[key]).slice(0, 200)}, page has none`;
    if (!(key in served)) return `${path}.${key}: page ${JSON.stringify(computed[key]).slice(0, 200)}, server has none`;
    const found = firstDifference(served[key], computed[key], `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

function windowsOf(summary, data) {
  const duration = summary.duration;
  // The tasks with the largest subtrees collapsed: arrows into them from outside land on one row.
  const parents = data.tasks.lines.map((line, task) => [line[8], task]).filter(([descendants]) => descendants > 0)
    .sort((a, b) => b[0] - a[0]).slice(0, 3).map(([, task]) => task);
  const spans = [[0, duration], [Math.floor(duration / 3), Math.floor((2 * duration) / 3)],
    [Math.floor(duration / 2), Math.floor(duration / 2 + duration / 100)],
    [Math.floor(duration / 2), Math.floor(duration / 2 + duration / 10000) + 1]];
  const out = [];
  for (const [begin, end] of spans)
    for (const width of [1200, 97]) {
      out.push({ begin, end, width });
      out.push({ begin, end, width, rows: { first: 0, last: 40, collapsed: [] } });
      out.push({ begin, end, width, rows: { first: 3, last: 3000, collapsed: parents } });
      out.push({ begin, end, width, rows: { first: 0, last: 3000, collapsed: [], by: 'time' } });
    }
  return out;
}

async function recordTwoEchoProcesses(echo) {
  const serverTrace = join(work, 'echo-server'), clientTrace = join(work, 'echo-client'), merged = join(work, 'echo-merged');
  const serverRecord = spawn(chronicle, ['record', '-q', '-o', serverTrace, '--', echo, '--server', '0', '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ended = new Promise((resolve) => serverRecord.on('exit', resolve));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    serverRecord.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(/listening on port (\d+)/);
      if (found) resolve(found[1]);
    });
    serverRecord.on('exit', (code) => reject(new Error(`the echo server exited with ${code} before listening`)));
  });
  execFileSync(chronicle, ['record', '-q', '-o', clientTrace, '--', echo, '--client', '127.0.0.1', port, '2', '5'], { stdio: ['ignore', 'ignore', 'inherit'] });
  assert.equal(await ended, 0, 'the echo server ends well');
  execFileSync(chronicle, ['merge', clientTrace, serverTrace, '-o', merged], { stdio: ['ignore', 'ignore', 'inherit'] });
  return merged;
}

// A flame graph's frames by call path: [total, self, count].
function framesByPath(answer) {
  const out = {};
  answer.frames.forEach(([parent, name], k) => {
    const path = [];
    for (let f = k; f > 0; f = answer.frames[f][0]) path.unshift(answer.names[answer.frames[f][1]]);
    if (k > 0) out[path.join(';')] = answer.frames[k].slice(2);
  });
  return out;
}

// A span's time (docs/viewer.md, "A span's time") the page counts as the server does: its flame
// graphs in both modes, merged and by thread, and its range stats per name and thread.
async function compareSpanTimes(local, base, duration, program) {
  for (const [begin, end] of [[0, duration], [Math.floor(duration / 3), Math.floor((2 * duration) / 3)]]) {
    for (const mode of ['wall', 'running'])
      for (const by of ['path', 'thread']) {
        const served = await (await fetch(`${base}api/flame?begin=${begin}&end=${end}&mode=${mode}&by=${by}`)).json();
        const computed = await local.flame(begin, end, by === 'thread', 'spans', mode);
        assert.equal(computed.mode, served.mode);
        const difference = firstDifference(framesByPath(served), framesByPath(computed));
        assert.equal(difference, null, `${program}: the ${mode} flame graph by ${by} of ${begin}-${end}: ${difference}`);
      }
    const served = await (await fetch(`${base}api/stats?begin=${begin}&end=${end}`)).json();
    const computed = await local.stats(begin, end);
    const byName = (names) => {
      const out = {};
      for (const { name, spans, wall_ns, pieces, running_ns } of names) {
        const total = (out[name] ??= { spans: 0, wall_ns: 0, pieces: 0, running_ns: 0 });
        Object.assign(total, { spans: total.spans + spans, wall_ns: total.wall_ns + wall_ns, pieces: total.pieces + pieces, running_ns: total.running_ns + running_ns });
      }
      return out;
    };
    if (served.top_names.length < 20) {
      const difference = firstDifference(byName(served.top_names), byName(computed.top_names));
      assert.equal(difference, null, `${program}: range stats' names of ${begin}-${end}: ${difference}`);
    }
    for (const lane of served.lanes)
      assert.equal(computed.lanes[lane.lane].busy_ns, lane.busy_ns, `${program}: ${lane.name}'s busy time in ${begin}-${end}`);
  }
}

async function compare(LocalBackend, trace, program) {
  const html = `${trace}.html`;
  execFileSync(chronicle, ['view', '--html', html, trace], { stdio: ['ignore', 'ignore', 'inherit'] });
  const text = readFileSync(html, 'utf8');
  const marker = 'window.CHRONICLE_DATA = ';
  const from = text.indexOf(marker) + marker.length;
  const data = JSON.parse(text.slice(from, text.indexOf(';</script>', from)));
  const local = new LocalBackend(data);

  server = spawn(chronicle, ['view', trace, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const base = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(/at (http:\/\/\S+)/);
      if (found) resolve(found[1]);
    });
    server.on('exit', (code) => reject(new Error(`chronicle view exited with ${code}`)));
  });

  let items = 0, blocks = 0;
  for (const { begin, end, width, rows } of windowsOf(data.summary, data)) {
    const query = rows ? `&rows=${rows.first}-${rows.last}&collapsed=${rows.collapsed.join(',')}${rows.by ? `&by=${rows.by}` : ''}` : '';
    const served = await (await fetch(`${base}api/window?begin=${begin}&end=${end}&width=${width}${query}`)).json();
    for (const lane of served.lanes) {
      assert.deepStrictEqual(lane.samples, [], 'the example has no stack samples (the page embeds none)');
      delete lane.samples;
    }
    const computed = await local.window(begin, end, width, rows);
    const difference = firstDifference(served, computed);
    assert.equal(difference, null, `${program}: window ${begin}-${end} at ${width} px, rows ${JSON.stringify(rows)}: ${difference}`);
    seen.downsampled += served.counters.filter((counter) => counter.downsampled).length;
    seen.mergedArrows += served.arrows.filter((arrow) => arrow[7] > 1).length;
    seen.taskBlocks += served.tasks.blocks.length;
    seen.messages += served.messages.length;
    seen.mergedMessages += served.messages.filter((message) => message[4] > 1).length;
    for (const lane of served.lanes) {
      items += lane.spans.length + lane.runs.length;
      blocks += lane.blocks.length + lane.run_blocks.length;
    }
  }
  seen.items += items;
  seen.blocks += blocks;
  await compareSpanTimes(local, base, data.summary.duration, program);
  console.log(`${program}: the page's windows are the server's (${items} spans and runs, ${blocks} busy blocks; so far ${seen.downsampled} downsampled counters, ${seen.messages} messages (${seen.mergedMessages} merged), ${seen.mergedArrows} merged arrows)`);
  server.kill('SIGTERM');
  server = undefined;
}
