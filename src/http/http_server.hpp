// An HTTP endpoint for metrics: GET /metrics answers with the snapshot `source` gives, in the
// format the scraper's Accept header asks for. Serves on a thread of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "metrics/snapshot.hpp"

namespace chronicle::metrics {

class MetricsHttpServer {
 public:
  using Source = std::function<MetricsSnapshot()>;
  // Why the source's values are no longer current (its process has ended), or nullopt while
  // they are. A scrape is then answered 503 with that text: a scraper must see the target down
  // rather than frozen values.
  using Unavailable = std::function<std::optional<std::string>()>;
  // Port 0 picks a free one. Throws std::runtime_error when it cannot listen.
  MetricsHttpServer(Source source, const std::string& address, uint16_t port, Unavailable unavailable = {});
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint16_t port_ = 0;
};

}  // namespace chronicle::metrics
