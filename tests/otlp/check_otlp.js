// Decodes an OTLP/JSON file with the official OpenTelemetry protobuf definitions (the
// protobufjs module generated from opentelemetry-proto that @opentelemetry/otlp-transformer
// ships), round-trips it through the binary protobuf encoding, and checks it against what the
// C++ test expects from the task graph.
//
// usage: node check_otlp.js EXPORT.json EXPECTED.json
// EXPECTED: {"resources": [{"service": NAME, "spans": N, "task_spans": N,
//            "errors": [{"spanId": HEX, "message": TEXT}], "parents": [[CHILD_HEX, PARENT_HEX]]}]}
'use strict';
const fs = require('fs');
const assert = require('assert/strict');
const { Request, hexIdsToBytes, canonical } = require('./otlp_decode');

function attribute(attributes, key) {
  const found = (attributes || []).find((kv) => kv.key === key);
  return found ? found.value : undefined;
}

function main() {
  const [exportPath, expectedPath] = process.argv.slice(2);
  const text = fs.readFileSync(exportPath, 'utf8');
  const expected = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));
  const json = JSON.parse(text);

  // fromObject takes int64 values as decimal strings (as the JSON encoding writes them);
  // verify checks the message it made against the definitions.
  const message = Request.fromObject(hexIdsToBytes(json, '$'));
  const problem = Request.verify(message);
  assert.equal(problem, null, `verify: ${problem}`);
  const bytes = Request.encode(message).finish();
  const decoded = Request.decode(bytes);
  const back = Request.toObject(decoded, { longs: String, enums: Number, bytes: Buffer });
  // Every field we wrote is one the definitions know, with its type: nothing is lost on the way.
  assert.deepEqual(canonical(back), canonical(json), 'the protobuf round trip changed the request');

  assert.equal(back.resourceSpans.length, expected.resources.length, 'resource count');
  const allSpanIds = new Set();
  let spanCount = 0;
  back.resourceSpans.forEach((resourceSpans, r) => {
    const want = expected.resources[r];
    const service = attribute(resourceSpans.resource.attributes, 'service.name');
    assert.equal(service && service.stringValue, want.service, `resource ${r}: service.name`);
    const spans = (resourceSpans.scopeSpans || []).flatMap((scope) => scope.spans || []);
    assert.equal(spans.length, want.spans, `resource ${r}: span count`);
    const byId = new Map();
    for (const span of spans) {
      const id = Buffer.from(span.spanId).toString('hex');
      assert.equal(span.traceId.length, 16, 'trace id length');
      assert.ok(!allSpanIds.has(id), `span id ${id} used twice`);
      allSpanIds.add(id);
      byId.set(id, span);
      assert.ok(BigInt(span.endTimeUnixNano) >= BigInt(span.startTimeUnixNano), `span ${id} ends before it starts`);
    }
    const taskSpans = spans.filter((span) => attribute(span.attributes, 'chronicle.task.id'));
    assert.equal(taskSpans.length, want.task_spans, `resource ${r}: task span count`);
    for (const span of spans) {
      if (!span.parentSpanId || span.parentSpanId.length === 0) continue;
      const parent = Buffer.from(span.parentSpanId).toString('hex');
      assert.ok(byId.has(parent), `span ${span.name}: parent ${parent} is not in the request`);
    }
    for (const [child, parent] of want.parents) {
      assert.ok(byId.has(child), `expected span ${child} missing`);
      assert.equal(Buffer.from(byId.get(child).parentSpanId || []).toString('hex'), parent, `parent of ${child}`);
    }
    const errors = spans.filter((span) => span.status && span.status.code === 2);
    assert.equal(errors.length, want.errors.length, `resource ${r}: error span count`);
    for (const error of want.errors) {
      const span = byId.get(error.spanId);
      assert.ok(span, `error span ${error.spanId} missing`);
      assert.equal(span.status.code, 2);
      assert.equal(span.status.message, error.message);
    }
    spanCount += spans.length;
  });
  console.log(`otlp check: ${back.resourceSpans.length} resources, ${spanCount} spans, ${bytes.length} protobuf bytes: ok`);
}

try {
  main();
} catch (error) {
  console.error(`otlp check failed: ${error.message}`);
  process.exit(1);
}
