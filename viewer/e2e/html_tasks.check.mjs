// A self-contained page works out each task's details (critical path included) from the facts
// it carries: they must be what the server answers. Records each program (the README's
// examples), asks `chronicle view` for every task over HTTP, and compares with the page's own
// answers (its src/local.ts bundled by esbuild, run here in node on the data `view --html`
// embedded).
//   node html_tasks.check.mjs CHRONICLE VIEWER_DIR PROGRAM...
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import assert from 'node:assert/strict';

const [chronicle, viewerDir, ...programs] = process.argv.slice(2).map((path) => resolve(path));
const work = mkdtempSync(join(tmpdir(), 'chronicle-html-tasks-'));
let server;
try {
  const esbuild = createRequire(join(viewerDir, 'package.json'))('esbuild');
  const bundle = join(work, 'local.mjs');
  await esbuild.build({ entryPoints: [join(viewerDir, 'src', 'local.ts')], bundle: true, format: 'esm', outfile: bundle, logLevel: 'warning' });
  const { LocalBackend } = await import(pathToFileURL(bundle).href);
  for (const [number, program] of programs.entries()) await compare(LocalBackend, join(work, `trace-${number}`), program);
} finally {
  server?.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}

async function compare(LocalBackend, trace, program) {
  execFileSync(chronicle, ['record', '-o', trace, '--', program], { stdio: ['ignore', 'ignore', 'inherit'] });
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

  const tasks = data.tasks.lines.length;
  assert.ok(tasks > 3, `the example has tasks (${tasks})`);
  let steps = 0;
  for (let k = 0; k < tasks; ++k) {
    const served = await (await fetch(`${base}api/task?index=${k}`)).json();
    const computed = await local.task(k);
    assert.deepStrictEqual(computed, served, `task ${k} (${served.id})`);
    steps += served.critical_path.steps.length;
  }
  assert.ok(steps > tasks, 'paths with several steps were compared');
  console.log(`${program}: the page's details of ${tasks} tasks (${steps} critical path steps) are the server's`);
  server.kill('SIGTERM');
  server = undefined;
}
