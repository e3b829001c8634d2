#include "http/http_server.hpp"

#include <httplib.h>

#include <fmt/format.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "http/http_limits.hpp"
#include "metrics/exposition.hpp"

namespace chronicle::metrics {
struct MetricsHttpServer::State {
  BoundedHttpServer server;
  std::atomic<bool> listen_returned{false};
  std::thread thread;
};

MetricsHttpServer::MetricsHttpServer(Source source, const std::string& address, uint16_t port, Unavailable unavailable)
    : state_(std::make_unique<State>()) {
  state_->server.Get("/metrics", [source = std::move(source), unavailable = std::move(unavailable)](
                                     const httplib::Request& request, httplib::Response& response) {
    if (unavailable) {
      if (const std::optional<std::string> reason = unavailable()) {
        response.status = 503;
        response.set_content(*reason + "\n", "text/plain");
        return;
      }
    }
    try {
      const TextFormat format = negotiate_format(request.get_header_value("Accept"));
      response.set_content(expose(source(), format), std::string(content_type(format)).c_str());
    } catch (const std::exception& error) {
      response.status = 500;
      response.set_content(fmt::format("cannot read metrics: {}\n", error.what()), "text/plain");
    }
  });
  state_->server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("chronicle metrics: see /metrics\n", "text/plain");
  });
  if (port == 0) {
    const int chosen = state_->server.bind_to_any_port(address);
    if (chosen <= 0) throw std::runtime_error(fmt::format("cannot listen on {} (any port)", address));
    port_ = static_cast<uint16_t>(chosen);
  } else {
    if (!state_->server.bind_to_port(address, port))
      throw std::runtime_error(fmt::format("cannot listen on {}:{}", address, port));
    port_ = port;
  }
  state_->server.widen_backlog();
  state_->thread = std::thread([state = state_.get()] {
    state->server.listen_after_bind();
    state->listen_returned.store(true, std::memory_order_release);
  });
}

MetricsHttpServer::~MetricsHttpServer() {
  // httplib's stop() does nothing until the listening thread has marked the server running: a
  // server destroyed at once would otherwise listen forever, and the join below never return.
  while (!state_->server.is_running() && !state_->listen_returned.load(std::memory_order_acquire))
    std::this_thread::yield();
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

}  // namespace chronicle::metrics
