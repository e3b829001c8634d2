# A service traced by the official OpenTelemetry Python SDK, not by chronicle: the second peer of
# tests/otel_peer_test.cpp (js_service.js is the first), answering the same calls. GET /quote?id=N:
# a SERVER span continuing the caller's W3C traceparent, an INTERNAL "price lookup" span with
# attributes, and a CLIENT span for a POST /audit back to the caller's own server (port in the
# x-audit-port header), carrying that span's traceparent. POST /shutdown writes every finished
# span as one OTLP/JSON request to OUT and exits: the SDK's own OTLP encoder makes the request,
# and protobuf's JSON mapping writes it, with the ids in hex as OTLP/JSON has them (the mapping
# would write base64).
#
# With OTEL_EXPORTER_OTLP_ENDPOINT set, the SDK's own OTLP/HTTP exporter also sends each span there
# as it ends (the jaeger test).
#
# usage: python3 py_service.py OUT PORT_FILE
import base64
import os
import http.client
import http.server
import json
import sys
import threading
from urllib.parse import parse_qs, urlparse

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if len(sys.argv) != 3:
    print("usage: python3 py_service.py OUT PORT_FILE", file=sys.stderr)
    sys.exit(2)
OUT, PORT_FILE = sys.argv[1:]

exporter = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "quotes-py", "host.name": "py-host"}))
provider.add_span_processor(SimpleSpanProcessor(exporter))
if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
tracer = provider.get_tracer("quotes-py-http")
propagator = TraceContextTextMapPropagator()

ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def hex_ids(node):
    """protobuf's JSON mapping writes bytes in base64; OTLP/JSON writes trace and span ids in hex."""
    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex() if key in ID_KEYS and isinstance(value, str) else hex_ids(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [hex_ids(item) for item in node]
    return node


def audit(port, quote_id):
    with tracer.start_as_current_span("POST /audit", kind=SpanKind.CLIENT) as span:
        headers = {}
        propagator.inject(headers)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("POST", "/audit", body=f"audit {quote_id}", headers=headers)
            answer = connection.getresponse()
            answer.read()
            span.set_attribute("http.response.status_code", answer.status)
            connection.close()
        except OSError as error:
            span.set_status(Status(StatusCode.ERROR, str(error)))


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, text, status=200):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path != "/quote":
            return self.answer("", 404)
        quote_id = int(parse_qs(url.query)["id"][0])
        caller = propagator.extract(dict(self.headers.items()))
        attributes = {"http.route": "/quote", "quote.id": quote_id}
        with tracer.start_as_current_span("GET /quote", context=caller, kind=SpanKind.SERVER, attributes=attributes):
            with tracer.start_as_current_span("price lookup") as lookup:
                lookup.set_attribute("price.currency", "EUR")
                lookup.set_attribute("price.cents", 100 + quote_id)
            audit(int(self.headers["x-audit-port"]), quote_id)
        self.answer(f"quote {quote_id}: {100 + quote_id}")

    def do_POST(self):
        if self.path != "/shutdown":
            return self.answer("", 404)
        request = encode_spans(exporter.get_finished_spans())
        document = hex_ids(MessageToDict(request, use_integers_for_enums=True))
        with open(OUT, "w") as out:
            json.dump(document, out)
        self.answer("bye")
        threading.Thread(target=self.server.shutdown).start()


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE, "w") as port_file:
    port_file.write(str(server.server_address[1]))
server.serve_forever()
