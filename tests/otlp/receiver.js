// A local OTLP/HTTP trace receiver for the push tests: accepts POST /v1/traces in protobuf
// (application/x-protobuf) and JSON (application/json), decodes each request with the official
// definitions and appends one line per request to a log (NDJSON), written before it answers:
//   {"time": MS, "status": 200, "protocol": "protobuf"|"json", "spans": [{"service": NAME, "span": {...}}]}
//   {"time": MS, "status": 503}                       a request it was told to refuse
//   {"time": MS, "status": 400, "error": TEXT}        a request it could not decode
// Spans are in canonical form (ids hex, defaults left out), so two logs compare as data.
//
// usage: node receiver.js --log FILE [--port N] [--port-file FILE] [--fail-first N]
//        [--fail-status CODE] [--retry-after SECONDS] [--exit-after K] [--drop-request K]
//        [--reject-spans N]
//   --port 0 (default) takes an ephemeral port; --port-file receives it once listening.
//   --fail-first N answers 503 (or --fail-status) to the first N requests, with Retry-After
//     when given.
//   --exit-after K exits after answering K requests with 200 (the test then starts another).
//   --drop-request K takes the K-th request (logs its spans) and then cuts the connection
//     without answering, as a collector that crashes after accepting does: the client cannot
//     know and sends it again (at-least-once delivery).
//   --reject-spans N answers each accepted request with a partial success rejecting N spans.
'use strict';
const fs = require('fs');
const http = require('http');
const { Response, fromJson, fromProtobuf, toPlain, canonical } = require('./otlp_decode');

function parseArguments(argv) {
  const options = { port: 0, failFirst: 0, failStatus: 503, exitAfter: 0, dropRequest: 0, rejectSpans: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const [name, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${name} needs a value`);
    const key = { '--log': 'log', '--port': 'port', '--port-file': 'portFile', '--fail-first': 'failFirst',
      '--fail-status': 'failStatus', '--retry-after': 'retryAfter', '--exit-after': 'exitAfter',
      '--drop-request': 'dropRequest', '--reject-spans': 'rejectSpans' }[name];
    if (!key) throw new Error(`unknown option ${name}`);
    options[key] = ['log', 'portFile', 'retryAfter'].includes(key) ? value : Number(value);
  }
  if (!options.log) throw new Error('--log FILE is required');
  return options;
}

function attribute(attributes, key) {
  const found = (attributes || []).find((kv) => kv.key === key);
  return found && found.value ? found.value.stringValue : undefined;
}

// Every span of a request with its resource's service name.
function spansOf(request) {
  const plain = toPlain(request);
  const spans = [];
  for (const resourceSpans of plain.resourceSpans || []) {
    const service = attribute(resourceSpans.resource && resourceSpans.resource.attributes, 'service.name');
    for (const scopeSpans of resourceSpans.scopeSpans || [])
      for (const span of scopeSpans.spans || []) spans.push({ service, span: canonical(span) });
  }
  return spans;
}

function main() {
  const options = parseArguments(process.argv.slice(2));
  let requests = 0;
  let accepted = 0;
  const log = (entry) => fs.appendFileSync(options.log, JSON.stringify({ time: Date.now(), ...entry }) + '\n');

  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      requests += 1;
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        log({ status: 404, error: `${request.method} ${request.url}` });
        response.writeHead(404).end();
        return;
      }
      if (requests <= options.failFirst) {
        log({ status: options.failStatus });
        const headers = options.retryAfter !== undefined ? { 'Retry-After': options.retryAfter } : {};
        response.writeHead(options.failStatus, headers).end('told to fail');
        return;
      }
      const body = Buffer.concat(chunks);
      const type = (request.headers['content-type'] || '').split(';')[0].trim();
      const protobuf = type === 'application/x-protobuf';
      let spans;
      try {
        if (!protobuf && type !== 'application/json') throw new Error(`content type ${type}`);
        spans = spansOf(protobuf ? fromProtobuf(body) : fromJson(body.toString('utf8')));
      } catch (error) {
        log({ status: 400, error: error.message });
        response.writeHead(400).end(error.message);
        return;
      }
      accepted += 1;
      log({ status: 200, protocol: protobuf ? 'protobuf' : 'json', spans });
      if (accepted === options.dropRequest) {
        request.socket.destroy();
        return;
      }
      const partialSuccess =
        options.rejectSpans > 0
          ? { rejectedSpans: options.rejectSpans, errorMessage: 'told to reject' }
          : undefined;
      const answer = Response.create(partialSuccess ? { partialSuccess } : {});
      response.on('finish', () => {
        if (options.exitAfter > 0 && accepted >= options.exitAfter) process.exit(0);
      });
      if (protobuf) {
        response.writeHead(200, { 'Content-Type': 'application/x-protobuf' }).end(Response.encode(answer).finish());
      } else {
        const json = partialSuccess
          ? { partialSuccess: { rejectedSpans: String(options.rejectSpans), errorMessage: 'told to reject' } }
          : {};
        response.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(json));
      }
    });
  });
  // A kept-alive connection of a client must not hold an exiting receiver open.
  server.keepAliveTimeout = 60000;
  server.listen(options.port, '127.0.0.1', () => {
    if (options.portFile) {
      // Written aside and renamed: whoever waits for the file reads a whole port number.
      fs.writeFileSync(options.portFile + '.tmp', String(server.address().port));
      fs.renameSync(options.portFile + '.tmp', options.portFile);
    }
  });
}

try {
  main();
} catch (error) {
  console.error(`receiver: ${error.message}`);
  process.exit(2);
}
