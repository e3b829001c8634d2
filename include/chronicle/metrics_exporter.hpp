// An in-process exporter: serves this process's metrics at http://ADDRESS:PORT/metrics in the
// OpenMetrics (or, if the scraper asks for nothing else, Prometheus text) format. Link
// chronicle::exporter. Without it, `chronicle metrics serve PID` does the same from outside.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace chronicle {

class MetricsExporter {
 public:
  // Port 0 picks a free port (see port()). Throws std::runtime_error when it cannot listen.
  explicit MetricsExporter(uint16_t port = 9464, const std::string& address = "127.0.0.1");
  ~MetricsExporter();  // stops serving
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  uint16_t port() const;

 private:
  struct Server;
  std::unique_ptr<Server> server_;
};

}  // namespace chronicle
