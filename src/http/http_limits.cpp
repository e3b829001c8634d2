#include "http/http_limits.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace chronicle::metrics {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kExchangeTimeout = std::chrono::seconds(30);
constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kRequestsPerConnection = 100;
// Only requests whose head is whole take a worker, each for 30 s at most.
constexpr size_t kMaxWorkers = 64;
constexpr int kListenBacklog = 1024;
constexpr auto kLongestPoll = std::chrono::seconds(1);

// Workers start as requests need them, up to a bound; cpp-httplib's own pool has a fixed
// number (8 here).
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

  // No more jobs come. Those queued are still run.
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

// cpp-httplib's listening loop only hands each accepted socket over: no thread needed.
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> job) override { job(); }
  void shutdown() override {}
};

struct Connection {
  int fd = -1;
  std::string peer;
  std::string received;  // read from the socket; `taken` bytes of it consumed by requests
  size_t taken = 0;
  Clock::time_point head_deadline;
  size_t requests = 0;

  bool has_whole_head() const { return received.find("\r\n\r\n", taken) != std::string::npos; }
  void forget_taken() {
    received.erase(0, taken);
    taken = 0;
  }
};

std::string address_of(int fd, bool remote, int* port = nullptr) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  sockaddr* raw = reinterpret_cast<sockaddr*>(&address);
  if ((remote ? ::getpeername(fd, raw, &length) : ::getsockname(fd, raw, &length)) != 0) return {};
  char host[NI_MAXHOST] = {};
  char service[NI_MAXSERV] = {};
  if (::getnameinfo(raw, length, host, sizeof host, service, sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return {};
  if (port) *port = std::atoi(service);
  return host;
}

// Waits for `events` on `fd` until `deadline`.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd polled{fd, events, 0};
    const int ready = ::poll(&polled, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0 && !(polled.revents & (POLLERR | POLLNVAL));
  }
}

// One request's exchange: the head from what the waiting room read, then the socket, every
// read and write within one deadline for the whole exchange.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Connection& connection, Clock::time_point deadline) : connection_(connection), deadline_(deadline) {}

  bool is_readable() const override {
    return connection_.taken < connection_.received.size() || wait_for(connection_.fd, POLLIN, deadline_);
  }
  bool is_writable() const override { return wait_for(connection_.fd, POLLOUT, deadline_); }

  ssize_t read(char* ptr, size_t size) override {
    if (const size_t buffered = connection_.received.size() - connection_.taken; buffered > 0) {
      const size_t count = std::min(size, buffered);
      std::memcpy(ptr, connection_.received.data() + connection_.taken, count);
      connection_.taken += count;
      return static_cast<ssize_t>(count);
    }
    if (!wait_for(connection_.fd, POLLIN, deadline_)) return -1;
    return ::recv(connection_.fd, ptr, size, MSG_DONTWAIT);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return ::send(connection_.fd, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = address_of(connection_.fd, true, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = address_of(connection_.fd, false, &port);
  }
  socket_t socket() const override { return connection_.fd; }

 private:
  Connection& connection_;
  const Clock::time_point deadline_;
};

enum class HeadState { incomplete, whole, dropped };

// Reads what the peer sent so far, without blocking.
HeadState receive_head(Connection& connection) {
  char buffer[4096];
  for (;;) {
    const ssize_t count = ::recv(connection.fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (count == 0) return HeadState::dropped;
    if (count < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? HeadState::incomplete : HeadState::dropped;
    connection.received.append(buffer, static_cast<size_t>(count));
    if (connection.has_whole_head()) return HeadState::whole;
    if (connection.received.size() - connection.taken > kMaxHeadBytes) return HeadState::dropped;
  }
}

}  // namespace

// The connections of one server: counted per peer, waiting for their heads on one thread,
// answered by workers.
struct BoundedHttpServer::Connections {
  Connections(BoundedHttpServer& owner, const HttpLimits& limits)
      : server(owner), limits(limits), wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    waiter = std::thread([this] { wait_for_heads(); });
  }

  ~Connections() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
      // Those being answered fail their next read or write at once.
      for (const int fd : serving) ::shutdown(fd, SHUT_RDWR);
    }
    wake();
    waiter.join();
    workers.shutdown();
    for (Connection* connection : arriving) close(connection, false);
    for (Connection* connection : returning) close(connection);
    ::close(wake_fd);
  }

  // From the listening thread or a worker: a connection to wait for a head on.
  void hand_over(Connection* connection, bool counted) {
    {
      std::lock_guard lock(mutex);
      (counted ? returning : arriving).push_back(connection);
    }
    wake();
  }

  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t ignored = ::write(wake_fd, &one, sizeof one);
  }

  void close(Connection* connection, bool counted = true) {
    if (counted) {
      std::lock_guard lock(mutex);
      if (--per_peer[connection->peer] == 0) per_peer.erase(connection->peer);
      --total;
    }
    ::shutdown(connection->fd, SHUT_RDWR);
    ::close(connection->fd);
    delete connection;
  }

  void wait_for_heads();
  void admit(Connection* connection, std::vector<Connection*>& waiting);
  void dispatch(Connection* connection);
  void answer(Connection* connection);

  BoundedHttpServer& server;
  const HttpLimits limits;
  const int wake_fd;
  std::mutex mutex;
  std::vector<Connection*> arriving;   // accepted, not yet counted
  std::vector<Connection*> returning;  // kept alive after an answer, counted
  std::map<std::string, size_t> per_peer;
  size_t total = 0;
  std::set<int> serving;
  bool stopping = false;
  OnDemandPool workers{kMaxWorkers};
  std::thread waiter;
};

// Counts a new connection, making room by closing the oldest connection still waiting for its
// head (of the same peer when that peer is at its cap); closes the new one when none waits.
void BoundedHttpServer::Connections::admit(Connection* connection, std::vector<Connection*>& waiting) {
  bool peer_full = false;
  bool all_full = false;
  {
    std::lock_guard lock(mutex);
    const auto found = per_peer.find(connection->peer);
    peer_full = found != per_peer.end() && found->second >= limits.max_connections_per_peer;
    all_full = total >= limits.max_connections;
  }
  if (peer_full || all_full) {
    const auto oldest = std::find_if(waiting.begin(), waiting.end(), [&](const Connection* other) {
      return !peer_full || other->peer == connection->peer;
    });
    if (oldest == waiting.end()) return close(connection, false);
    close(*oldest);
    waiting.erase(oldest);
  }
  {
    std::lock_guard lock(mutex);
    ++per_peer[connection->peer];
    ++total;
  }
  waiting.push_back(connection);
}

void BoundedHttpServer::Connections::wait_for_heads() {
  std::vector<Connection*> waiting;  // oldest first
  std::vector<pollfd> polled;
  for (;;) {
    std::vector<Connection*> arrived, returned;
    {
      std::lock_guard lock(mutex);
      if (stopping) break;
      arrived.swap(arriving);
      returned.swap(returning);
    }
    waiting.insert(waiting.end(), returned.begin(), returned.end());
    for (Connection* connection : arrived) admit(connection, waiting);

    polled.assign(1, pollfd{wake_fd, POLLIN, 0});
    Clock::time_point next_deadline = Clock::now() + kLongestPoll;
    for (const Connection* connection : waiting) {
      polled.push_back(pollfd{connection->fd, POLLIN, 0});
      next_deadline = std::min(next_deadline, connection->head_deadline);
    }
    const bool pipelined = std::any_of(waiting.begin(), waiting.end(), [](auto* c) { return c->has_whole_head(); });
    const auto timeout = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
    ::poll(polled.data(), polled.size(), pipelined ? 0 : static_cast<int>(std::max<int64_t>(timeout.count(), 0)));
    uint64_t wakes = 0;
    [[maybe_unused]] const ssize_t ignored = ::read(wake_fd, &wakes, sizeof wakes);

    const Clock::time_point now = Clock::now();
    std::vector<Connection*> still_waiting;
    for (size_t i = 0; i < waiting.size(); ++i) {
      Connection* connection = waiting[i];
      HeadState state = connection->has_whole_head() ? HeadState::whole : HeadState::incomplete;
      if (state == HeadState::incomplete && polled[i + 1].revents != 0) state = receive_head(*connection);
      if (state == HeadState::incomplete && now >= connection->head_deadline) state = HeadState::dropped;
      if (state == HeadState::whole)
        dispatch(connection);
      else if (state == HeadState::dropped)
        close(connection);
      else
        still_waiting.push_back(connection);
    }
    waiting.swap(still_waiting);
  }
  for (Connection* connection : waiting) close(connection);
}

void BoundedHttpServer::Connections::dispatch(Connection* connection) {
  bool stopped = false;
  {
    std::lock_guard lock(mutex);
    stopped = stopping;
    if (!stopped) serving.insert(connection->fd);
  }
  if (stopped) return close(connection);
  workers.enqueue([this, connection] { answer(connection); });
}

// On a worker: one request, then the connection waits for its next head, or is closed.
void BoundedHttpServer::Connections::answer(Connection* connection) {
  const bool last = ++connection->requests >= kRequestsPerConnection;
  bool connection_closed = false;
  ConnectionStream stream(*connection, Clock::now() + kExchangeTimeout);
  const bool answered = server.process_request(stream, last, connection_closed, nullptr);
  connection->forget_taken();
  {
    std::lock_guard lock(mutex);
    serving.erase(connection->fd);
  }
  if (!answered || connection_closed || last) return close(connection);
  connection->head_deadline = Clock::now() + limits.head_timeout;
  hand_over(connection, true);
}

BoundedHttpServer::BoundedHttpServer(HttpLimits limits) : connections_(std::make_unique<Connections>(*this, limits)) {
  new_task_queue = [] { return new InlineQueue; };
  set_socket_options([this](socket_t socket) {
    httplib::default_socket_options(socket);
    listening_socket_ = socket;
  });
}

BoundedHttpServer::~BoundedHttpServer() = default;

void BoundedHttpServer::widen_backlog() {
  if (listening_socket_ >= 0) ::listen(listening_socket_, kListenBacklog);
}

bool BoundedHttpServer::process_and_close_socket(socket_t socket) {
  auto* connection = new Connection;
  connection->fd = socket;
  connection->peer = address_of(socket, true);
  connection->head_deadline = Clock::now() + connections_->limits.head_timeout;
  connections_->hand_over(connection, false);
  return true;
}

}  // namespace chronicle::metrics
