// A chronicle-traced C++ program talking to a service traced by an OpenTelemetry SDK
// (tests/otlp/js_service.js or py_service.py) over HTTP with W3C traceparent headers, both ways.
// For each of REQUESTS requests it asks for a quote inside its span "client/quote request"; while
// serving it, the service posts an audit record back to this program's own server, which
// continues the service's trace (ReceiveScope) in a span "audit/record audit". Traced through the
// environment (chronicle record).
//   otel_peer_client SERVICE_PORT REQUESTS
#include <httplib.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: otel_peer_client SERVICE_PORT REQUESTS\n");
    return 2;
  }
  const int service_port = std::atoi(argv[1]);
  const int requests = std::atoi(argv[2]);
  httplib::Server audits;
  audits.Post("/audit", [](const httplib::Request& request, httplib::Response& response) {
    chronicle::ReceiveScope receive(request.get_header_value("traceparent"));
    CHRONICLE_SPAN("audit", "record audit");
    response.set_content("recorded", "text/plain");
  });
  const int audit_port = audits.bind_to_any_port("127.0.0.1");
  if (audit_port <= 0) {
    std::fprintf(stderr, "otel_peer_client: cannot listen on 127.0.0.1\n");
    return 1;
  }
  std::thread listening([&] { audits.listen_after_bind(); });
  httplib::Client service("127.0.0.1", service_port);
  int failed = 0;
  for (int id = 0; id < requests; ++id) {
    CHRONICLE_SPAN("client", "quote request");
    const httplib::Headers headers = {{"traceparent", chronicle::send_traceparent()},
                                      {"x-audit-port", std::to_string(audit_port)}};
    const auto answer = service.Get("/quote?id=" + std::to_string(id), headers);
    if (!answer || answer->status != 200) ++failed;
  }
  audits.stop();
  listening.join();
  std::printf("%d requests, %d failed\n", requests, failed);
  return failed == 0 ? 0 : 1;
}
