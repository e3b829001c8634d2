// The OTLP decoding the checks share: requests in the OTLP JSON encoding or in protobuf, read
// with the official definitions (the protobufjs module generated from opentelemetry-proto that
// @opentelemetry/otlp-transformer ships).
'use strict';
const assert = require('assert/strict');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root');

const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Response = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
const ID_FIELDS = { traceId: 32, spanId: 16, parentSpanId: 16 };

// The OTLP JSON encoding differs from protobuf's JSON mapping in one point: ids are hex, not
// base64. Turn them into bytes, checking their form, before the generic decoder sees them.
function hexIdsToBytes(value, path) {
  if (Array.isArray(value)) return value.map((item, i) => hexIdsToBytes(item, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const [key, item] of Object.entries(value)) {
    if (key in ID_FIELDS) {
      assert.match(item, new RegExp(`^[0-9a-f]{${ID_FIELDS[key]}}$`), `${path}.${key} is not a hex id`);
      assert.notEqual(item, '0'.repeat(ID_FIELDS[key]), `${path}.${key} is all zero`);
      out[key] = Buffer.from(item, 'hex');
    } else {
      out[key] = hexIdsToBytes(item, `${path}.${key}`);
    }
  }
  return out;
}

// What protobuf's toObject gives back when defaults are left out: no empty arrays, no
// zero/empty scalars, ids as hex again.
function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex');
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const [key, item] of Object.entries(value)) {
    if (Array.isArray(item) && item.length === 0) continue;
    if (item === 0 || item === '' || item === false || item === '0') continue;
    out[key] = canonical(item);
  }
  return out;
}

// A request from OTLP/JSON text, verified against the definitions.
function fromJson(text) {
  const message = Request.fromObject(hexIdsToBytes(JSON.parse(text), '$'));
  const problem = Request.verify(message);
  assert.equal(problem, null, `verify: ${problem}`);
  return message;
}

// A request from protobuf bytes; throws on bytes that are not one.
function fromProtobuf(bytes) {
  return Request.decode(bytes);
}

function toPlain(message) {
  return Request.toObject(message, { longs: String, enums: Number, bytes: Buffer });
}

module.exports = { Request, Response, hexIdsToBytes, canonical, fromJson, fromProtobuf, toPlain };
