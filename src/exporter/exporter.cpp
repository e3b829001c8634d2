// chronicle::MetricsExporter: this process's own metrics over HTTP. Part of chronicle::exporter,
// which a program links with the runtime; the tools use MetricsHttpServer alone.
#include "chronicle/metrics_exporter.hpp"

#include "http/http_server.hpp"

namespace chronicle {

struct MetricsExporter::Server {
  Server(uint16_t port, const std::string& address) : http(metrics::read_own_metrics, address, port) {}
  metrics::MetricsHttpServer http;
};

MetricsExporter::MetricsExporter(uint16_t port, const std::string& address)
    : server_(std::make_unique<Server>(port, address)) {}

MetricsExporter::~MetricsExporter() = default;

uint16_t MetricsExporter::port() const {
  return server_->http.port();
}

}  // namespace chronicle
