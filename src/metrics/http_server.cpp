#include "metrics/http_server.hpp"

#include <httplib.h>

#include <fmt/format.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "metrics/exposition.hpp"

namespace chronicle::metrics {
namespace {

// A scraper sends its request at once: a connection silent this long is let go, so that idle or
// half-sent connections (a slowloris neighbour) hold a worker for seconds, not for ever.
constexpr time_t kReadTimeoutSeconds = 5;
constexpr time_t kWriteTimeoutSeconds = 5;
constexpr time_t kKeepAliveTimeoutSeconds = 5;
// Workers start as connections need them, up to this many: many idle connections held open by
// someone else still leave one for the scraper. Each costs a thread only once needed.
constexpr size_t kMaxWorkers = 256;
// Connections the kernel holds before they are accepted (cpp-httplib listens with 5).
constexpr int kListenBacklog = 1024;

// cpp-httplib's own pool has a fixed number of workers (8 here): a handful of silent
// connections queue every scrape behind their read timeouts.
class OnDemandPool final : public httplib::TaskQueue {
 public:
  explicit OnDemandPool(size_t max_workers) : max_workers_(max_workers) {}

  void enqueue(std::function<void()> job) override {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    if (jobs_.size() > idle_ && workers_.size() < max_workers_)
      workers_.emplace_back([this] { work(); });
    else
      wake_.notify_one();
  }

  // The listening loop has ended: no more jobs come. Those queued are still served.
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  const size_t max_workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> workers_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace

struct MetricsHttpServer::State {
  httplib::Server server;
  std::atomic<bool> listen_returned{false};
  std::thread thread;
  int listening_socket = -1;  // the last socket httplib made to listen on
};

namespace {

void limit_slow_clients(httplib::Server& server, int& listening_socket) {
  server.new_task_queue = [] { return new OnDemandPool(kMaxWorkers); };
  server.set_read_timeout(kReadTimeoutSeconds, 0);
  server.set_write_timeout(kWriteTimeoutSeconds, 0);
  server.set_keep_alive_timeout(kKeepAliveTimeoutSeconds);
  server.set_socket_options([&listening_socket](socket_t socket) {
    httplib::default_socket_options(socket);
    listening_socket = socket;
  });
}

// httplib listens with a backlog of 5; listening again on the bound socket widens it.
void widen_backlog(int listening_socket) {
  if (listening_socket >= 0) ::listen(listening_socket, kListenBacklog);
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(Source source, const std::string& address, uint16_t port, Unavailable unavailable)
    : state_(std::make_unique<State>()) {
  limit_slow_clients(state_->server, state_->listening_socket);
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
  widen_backlog(state_->listening_socket);
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
