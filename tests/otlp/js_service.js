// A service traced by the official OpenTelemetry JS SDK, not by chronicle: the peer of
// tests/otel_peer_test.cpp. It answers GET /quote?id=N: a SERVER span continuing the caller's
// W3C traceparent, an INTERNAL "price lookup" span with attributes, and a CLIENT span for a
// POST /audit back to the caller's own server (port in the x-audit-port header), carrying that
// span's traceparent. Its spans' starts are whole milliseconds (the SDK's Date.now()). POST
// /shutdown writes every finished span as one OTLP/JSON request (the SDK's own serializer) to
// OUT and exits.
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set, the SDK's own OTLP/HTTP exporter also sends each span there
// as it ends (the jaeger test).
//
// usage: node js_service.js OUT PORT_FILE
'use strict';
const fs = require('fs');
const http = require('http');
const api = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { JsonTraceSerializer } = require('@opentelemetry/otlp-transformer');

const [out, portFile] = process.argv.slice(2);
if (!out || !portFile) {
  console.error('usage: node js_service.js OUT PORT_FILE');
  process.exit(2);
}
const exporter = new InMemorySpanExporter();
const processors = [new SimpleSpanProcessor(exporter)];
if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT) {
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
  processors.push(new SimpleSpanProcessor(new OTLPTraceExporter()));
}
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'quotes-js', 'host.name': 'js-host' }),
  spanProcessors: processors,
});
const tracer = provider.getTracer('quotes-js-http');
const propagator = new W3CTraceContextPropagator();

function audit(port, parent, id, done) {
  const span = tracer.startSpan('POST /audit', { kind: api.SpanKind.CLIENT }, parent);
  const headers = {};
  propagator.inject(api.trace.setSpan(parent, span), headers, api.defaultTextMapSetter);
  const request = http.request({ host: '127.0.0.1', port, path: '/audit', method: 'POST', headers }, (answer) => {
    answer.resume();
    answer.on('end', () => {
      span.setAttribute('http.response.status_code', answer.statusCode);
      span.end();
      done();
    });
  });
  request.on('error', (error) => {
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: error.message });
    span.end();
    done();
  });
  request.end(`audit ${id}`);
}

function quote(request, response) {
  const url = new URL(request.url, 'http://localhost');
  const id = Number(url.searchParams.get('id'));
  const caller = propagator.extract(api.ROOT_CONTEXT, request.headers, api.defaultTextMapGetter);
  const server = tracer.startSpan(
    'GET /quote',
    { kind: api.SpanKind.SERVER, attributes: { 'http.route': '/quote', 'quote.id': id } },
    caller,
  );
  const inside = api.trace.setSpan(caller, server);
  const lookup = tracer.startSpan('price lookup', { attributes: { 'price.currency': 'EUR', 'price.cents': 100 + id } }, inside);
  lookup.end();
  audit(Number(request.headers['x-audit-port']), inside, id, () => {
    server.end();
    response.end(`quote ${id}: ${100 + id}`);
  });
}

const server = http.createServer((request, response) => {
  if (request.method === 'POST' && request.url === '/shutdown') {
    provider.forceFlush().finally(() => {
      fs.writeFileSync(out, Buffer.from(JsonTraceSerializer.serializeRequest(exporter.getFinishedSpans())));
      response.end('bye');
      server.close();
    });
    return;
  }
  if (request.method === 'GET' && request.url.startsWith('/quote')) return quote(request, response);
  response.statusCode = 404;
  response.end();
});
server.listen(0, '127.0.0.1', () => fs.writeFileSync(portFile, String(server.address().port)));
