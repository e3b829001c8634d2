#include "metrics/http_limits.hpp"

#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

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

}  // namespace chronicle::metrics
