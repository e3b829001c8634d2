// A trivial OTLP/HTTP trace sink for the push benchmark: answers 200 to every POST /v1/traces
// without decoding it, so that the figure measures the pusher, not the receiver.
//   otlp_sink [PORT]   (prints the port it listens on, then serves until killed)
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 0;
  httplib::Server server;
  std::atomic<uint64_t> requests{0}, bytes{0};
  server.Post("/v1/traces", [&](const httplib::Request& request, httplib::Response& response) {
    ++requests;
    bytes += request.body.size();
    response.set_content("", "application/x-protobuf");
  });
  server.set_payload_max_length(uint64_t{1} << 30);
  const int bound =
      port > 0 ? (server.bind_to_port("127.0.0.1", port) ? port : -1) : server.bind_to_any_port("127.0.0.1");
  if (bound < 0) {
    std::fprintf(stderr, "otlp_sink: cannot listen\n");
    return 1;
  }
  std::printf("%d\n", bound);
  std::fflush(stdout);
  server.listen_after_bind();
}
