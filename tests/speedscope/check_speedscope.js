// Imports a Chrome Trace Event JSON file with speedscope's own importer (the pinned npm package,
// which ships only its browser bundle) and fails on any console.warn or console.error during the
// import: speedscope warns when an end does not match the innermost open slice ("Tried to end
// ... when ... was on the top of the stack"), which is what a mis-nested export looks like.
//
// usage: node check_speedscope.js TRACE.json
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const release = path.join(__dirname, 'node_modules/speedscope/dist/release');
const bundleName = fs.readdirSync(release).find((name) => /^speedscope-\w+\.js$/.test(name));
if (!bundleName) throw new Error(`no speedscope bundle in ${release}`);
let bundle = fs.readFileSync(path.join(release, bundleName), 'utf8');

// The bundle is one function that defines the import module lazily (esbuild) and then renders the
// app. Find the import module's namespace (the object whose exports include
// importProfileGroupFromText) and its initializer, and return them just before the app starts.
function find(pattern, what) {
  const match = pattern.exec(bundle);
  if (!match) throw new Error(`speedscope bundle ${bundleName}: cannot find ${what} (another version?)`);
  return match;
}
const exportsMatch = find(/([\w$]+)\(([\w$]+),\{[^{}]*importProfileGroupFromText:\(\)=>[\w$]+/, 'the import module');
const namespace = exportsMatch[2];
const initPattern = /var ([\w$]+)=[\w$]+\(\(\)=>\{"use strict";/g;
initPattern.lastIndex = exportsMatch.index;
const init = initPattern.exec(bundle);
if (!init) throw new Error(`speedscope bundle ${bundleName}: cannot find the import module's initializer`);
const appStart = find(/console\.log\(`speedscope v\$\{/, 'the start of the app').index;
bundle = `${bundle.slice(0, appStart)}globalThis.speedscopeImport=(${init[1]}(),${namespace});return;${bundle.slice(appStart)}`;

// What the bundle touches while it defines its modules, outside the app.
const context = {
  console,
  setTimeout,
  clearTimeout,
  TextDecoder,
  TextEncoder,
  URL,
  Uint8Array,
  ArrayBuffer,
  performance,
  navigator: { userAgent: 'node', platform: 'node' },
  location: { hash: '', search: '', href: 'file:///', protocol: 'file:' },
  addEventListener() {},
  matchMedia: () => ({ matches: false, addEventListener() {}, addListener() {} }),
  localStorage: { getItem: () => null, setItem() {} },
  document: { createElement: () => ({ style: {}, getContext: () => null }), addEventListener() {}, head: {}, body: {} },
};
context.window = context;
context.self = context;
context.globalThis = context;
vm.createContext(context);
vm.runInContext(bundle, context, { filename: bundleName });
const { importProfileGroupFromText } = context.speedscopeImport;

async function main(file) {
  const text = fs.readFileSync(file, 'utf8');
  const complaints = [];
  const logs = [];
  const saved = { warn: console.warn, error: console.error, log: console.log };
  console.warn = (...args) => complaints.push(`warn: ${args.join(' ')}`);
  console.error = (...args) => complaints.push(`error: ${args.join(' ')}`);
  console.log = (...args) => logs.push(args.join(' '));
  let group;
  try {
    group = await importProfileGroupFromText(path.basename(file), text);
  } finally {
    Object.assign(console, saved);
  }
  if (!group || group.profiles.length === 0) {
    console.error(`${file}: speedscope imported no profile (${logs.join('; ')})`);
    process.exit(1);
  }
  if (complaints.length > 0) {
    console.error(`${file}: ${complaints.length} warnings or errors from speedscope's import, e.g.`);
    for (const complaint of complaints.slice(0, 5)) console.error(`  ${complaint}`);
    process.exit(1);
  }
  console.log(`${file}: ok (${logs.join('; ')}; ${group.profiles.length} profiles)`);
}

main(process.argv[2]).catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});
