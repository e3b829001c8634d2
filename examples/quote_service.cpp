// A quote service, written the way an asynchronous C++ service usually is: an Asio acceptor on
// a network thread hands each request to a chronicle::task coroutine on a thread pool; the
// request fans out to three backends at once with when_all, one of which (the stock service)
// fails for some requests and another (the price list) is too slow for others and is cut by
// with_timeout; the user cache is a contended lock; an audit record of each request goes through
// a producer/consumer queue to an audit thread; metrics count requests by outcome.
//
//   chronicle record -o quote-trace -- quote_example [requests] [clients]
//   chronicle stats quote-trace
//   chronicle stats --critical-path handle_request quote-trace
//   chronicle export --format otlp quote-trace
//
// It prints the outcomes, then what the clients measured: requests per second and the latency of
// a request, send to reply (p50, p99), the figures bench/service_rounds.sh compares traced and
// untraced.
//
// In one process: the server listens on 127.0.0.1 (a port the system chooses), and `clients`
// client threads send `requests` requests in all, one connection each. A request is a line
// "<traceparent> quote <id>": request i asks for quote i. Quote i times out when i % 10 == 3 (the
// price list hangs; with_timeout cancels it after 200 ms) and fails when i % 10 == 7 (the stock
// service is down while the price list hangs: when_all cancels the price call); the others
// succeed. The reply is "ok <price> for <user>", "unavailable" or "timeout".
//
// Nothing here calls chronicle's internals: the tasks, waits and their outcomes come from
// chronicle::task, the combinators and the Asio define; the traces (one per request) from the
// traceparent the client sends and the ReceiveScope the server opens.
#include <asio.hpp>
#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/metrics.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;

constexpr auto kPriceListLimit = 200ms;
constexpr auto kHungPriceList = 10s;  // only a cancellation ends it
constexpr auto kPriceListLatency = 2ms;
constexpr size_t kTraceparentLength = 55;

bool stock_is_down(int id) {
  return id % 10 == 7;
}
bool price_list_hangs(int id) {
  return id % 10 == 3 || stock_is_down(id);
}

// ---- the audit queue: records produced by requests, consumed by one thread ------------------

// A record waiting in the queue is a task of its own (created by the request that produced it,
// run and resolved by the audit thread), so the time it spent queued is in the trace.
struct AuditRecord {
  chronicle::TaskId task;
  int id;
  std::string outcome;
};

class AuditLog {
 public:
  AuditLog() : writer_([this] { drain(); }) {}
  ~AuditLog() { close(); }

  // Writes what is queued, then stops the audit thread.
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_one();
    if (writer_.joinable()) writer_.join();
  }

  void push(int id, std::string outcome) {
    const chronicle::TaskId record = chronicle::create_task(chronicle::TaskKind::promise, "audit record");
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({record, id, std::move(outcome)});
    }
    ready_.notify_one();
  }
  size_t written() const { return written_.load(); }

 private:
  void drain() {
    chronicle::set_thread_name("audit");
    std::unique_lock lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return closed_ || !queue_.empty(); });
      if (queue_.empty()) return;
      AuditRecord record = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      write(record);
      lock.lock();
    }
  }
  void write(const AuditRecord& record) {
    chronicle::TaskRunScope run(record.task);
    CHRONICLE_NOTE("audit", "quote {} {}", record.id, record.outcome);
    written_.fetch_add(1);
    chronicle::resolve_task(record.task, chronicle::TaskOutcome::ok);
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<AuditRecord> queue_;
  bool closed_ = false;
  std::atomic<size_t> written_{0};
  std::thread writer_;
};

// ---- the backends -----------------------------------------------------------------------------

struct Backends {
  chronicle::thread_pool& pool;
  std::mutex user_cache_lock;  // every request takes it: contended under load
  int user_cache_hits = 0;
};

chronicle::task<std::string> load_user(Backends& backends, int id) {
  co_await backends.pool.schedule();
  CHRONICLE_SPAN("backend", "user cache");
  std::unique_lock lock(backends.user_cache_lock, std::defer_lock);
  {
    CHRONICLE_SPAN("backend", "wait for user cache lock");
    lock.lock();
  }
  ++backends.user_cache_hits;
  std::this_thread::sleep_for(200us);  // the cache's work, under its lock
  co_return "user" + std::to_string(id);
}

chronicle::task<int> load_price_list(Backends& backends, int id) {
  CHRONICLE_SPAN("backend", "pricing call");
  co_await backends.pool.sleep_for(price_list_hangs(id) ? std::chrono::nanoseconds(kHungPriceList)
                                                        : std::chrono::nanoseconds(kPriceListLatency));
  co_return 100 + id;
}

chronicle::task<int> check_stock(Backends& backends, int id) {
  co_await backends.pool.schedule();
  CHRONICLE_SPAN("backend", "stock call");
  if (stock_is_down(id)) throw std::runtime_error("stock service unavailable");
  co_return 7;
}

// ---- a request --------------------------------------------------------------------------------

struct Metrics {
  chronicle::Counter ok{"quote.requests", {{"outcome", "ok"}}};
  chronicle::Counter unavailable{"quote.requests", {{"outcome", "unavailable"}}};
  chronicle::Counter timed_out{"quote.requests", {{"outcome", "timeout"}}};
  chronicle::Histogram latency{"quote.latency_seconds"};
};

// Writes the reply on the connection's network thread and resumes the request there once
// written: the usual bridge from a coroutine to Asio.
class WriteReply {
 public:
  WriteReply(tcp::socket& socket, std::string text) : socket_(socket), text_(std::move(text)) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> request) {
    asio::async_write(socket_, asio::buffer(text_), [request](const asio::error_code&, size_t) { request.resume(); });
  }
  void await_resume() const noexcept {}

 private:
  tcp::socket& socket_;
  std::string text_;
};

struct Service {
  Backends& backends;
  AuditLog& audit;
  Metrics& metrics;
};

chronicle::task<std::string> quote(Service& service, int id) {
  auto [user, price, stock] = co_await chronicle::when_all(
      load_user(service.backends, id), chronicle::with_timeout(load_price_list(service.backends, id), kPriceListLimit),
      check_stock(service.backends, id));
  co_return "ok " + std::to_string(price * stock) + " for " + user + "\n";
}

chronicle::task<void> handle_request(Service& service, std::shared_ptr<tcp::socket> socket, int id) {
  auto timer = service.metrics.latency.time();
  co_await service.backends.pool.schedule();  // off the network thread
  CHRONICLE_SPAN("service", "handle request");
  std::string reply;
  try {
    reply = co_await quote(service, id);
    service.metrics.ok.inc();
  } catch (const chronicle::timeout_error&) {
    reply = "timeout\n";
    service.metrics.timed_out.inc();
  } catch (const std::runtime_error& error) {
    CHRONICLE_NOTE("service", "quote {} failed: {}", id, error.what());
    reply = "unavailable\n";
    service.metrics.unavailable.inc();
  }
  service.audit.push(id, reply.substr(0, reply.find(' ')));
  co_await WriteReply(*socket, reply);
}

// ---- the server: accept, read one line, hand it to a task -------------------------------------

class Server {
 public:
  Server(asio::io_context& network, Service& service, chronicle::async_scope& requests)
      : acceptor_(network, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        service_(service),
        requests_(requests) {
    accept();
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void stop() { acceptor_.close(); }

 private:
  struct Connection {
    explicit Connection(tcp::socket accepted) : socket(std::make_shared<tcp::socket>(std::move(accepted))) {}
    std::shared_ptr<tcp::socket> socket;
    asio::streambuf line;
  };

  void accept() {
    acceptor_.async_accept([this](const asio::error_code& error, tcp::socket socket) {
      if (error) return;
      read(std::make_shared<Connection>(std::move(socket)));
      accept();
    });
  }
  void read(std::shared_ptr<Connection> connection) {
    asio::async_read_until(*connection->socket, connection->line, '\n',
                           [this, connection](const asio::error_code& error, size_t length) {
                             if (error) return;
                             std::string line(asio::buffers_begin(connection->line.data()),
                                              asio::buffers_begin(connection->line.data()) + length);
                             dispatch(connection->socket, line);
                           });
  }
  // "<traceparent> quote <id>\n": the request continues the client's trace.
  void dispatch(std::shared_ptr<tcp::socket> socket, const std::string& line) {
    const std::string traceparent = line.substr(0, kTraceparentLength);
    chronicle::ReceiveScope received(traceparent);
    const int id = std::atoi(line.c_str() + kTraceparentLength + 7);
    requests_.spawn(handle_request(service_, std::move(socket), id).named("request " + std::to_string(id)));
  }

  tcp::acceptor acceptor_;
  Service& service_;
  chronicle::async_scope& requests_;
};

// ---- the clients ------------------------------------------------------------------------------

std::string ask(unsigned short port, int id) {
  CHRONICLE_SPAN("client", "quote request");
  asio::io_context context;
  tcp::socket socket(context);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  const std::string request = chronicle::send_traceparent() + " quote " + std::to_string(id) + "\n";
  asio::write(socket, asio::buffer(request));
  asio::streambuf reply;
  const size_t length = asio::read_until(socket, reply, '\n');
  return std::string(asio::buffers_begin(reply.data()), asio::buffers_begin(reply.data()) + length - 1);
}

chronicle::task<void> join_all(chronicle::async_scope& requests) {
  co_await requests.join();
}

// The latency at quantile q (0 < q <= 1) of the sorted latencies: the least value with at least
// q of them at or below it.
double quantile_ms(const std::vector<std::chrono::nanoseconds>& sorted, double q) {
  const size_t rank = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(sorted.size()))));
  return std::chrono::duration<double, std::milli>(sorted[std::min(rank, sorted.size()) - 1]).count();
}

void print_load(std::vector<std::chrono::nanoseconds> latencies, std::chrono::steady_clock::duration elapsed) {
  std::sort(latencies.begin(), latencies.end());
  const double seconds = std::chrono::duration<double>(elapsed).count();
  std::printf("%zu requests in %.3f s: %.1f requests/s; latency p50 %.3f ms, p99 %.3f ms\n", latencies.size(), seconds,
              static_cast<double>(latencies.size()) / seconds, quantile_ms(latencies, 0.50),
              quantile_ms(latencies, 0.99));
}

}  // namespace

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 40;
  const int clients = argc > 2 ? std::atoi(argv[2]) : 4;
  if (requests < 1 || clients < 1) {
    std::fprintf(stderr, "usage: quote_example [requests >= 1] [clients >= 1]\n");
    return 2;
  }
  chronicle::thread_pool pool(2, "worker");
  Backends backends{pool, {}, 0};
  AuditLog audit;
  Metrics metrics;
  Service service{backends, audit, metrics};
  chronicle::async_scope in_flight;

  asio::io_context network;
  Server server(network, service, in_flight);
  const unsigned short port = server.port();  // read before the network thread uses the acceptor
  std::thread network_thread([&] {
    chronicle::set_thread_name("network");
    network.run();
  });

  std::atomic<int> next{0}, ok{0}, unavailable{0}, timed_out{0};
  std::vector<std::chrono::nanoseconds> latencies(static_cast<size_t>(requests));
  std::vector<std::thread> client_threads;
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c)
    client_threads.emplace_back([&, c] {
      chronicle::set_thread_name("client-" + std::to_string(c));
      for (int id = next++; id < requests; id = next++) {
        const auto sent = std::chrono::steady_clock::now();
        const std::string reply = ask(port, id);
        latencies[static_cast<size_t>(id)] = std::chrono::steady_clock::now() - sent;
        (reply.starts_with("ok ") ? ok : reply == "timeout" ? timed_out : unavailable)++;
      }
    });
  for (std::thread& client : client_threads) client.join();
  const auto elapsed = std::chrono::steady_clock::now() - start;

  chronicle::sync_wait(join_all(in_flight));
  asio::post(network, [&] { server.stop(); });
  network_thread.join();
  audit.close();
  std::printf("%d requests: %d ok, %d unavailable, %d timed out; %zu audit records\n", requests, ok.load(),
              unavailable.load(), timed_out.load(), audit.written());
  print_load(std::move(latencies), elapsed);
  return ok + unavailable + timed_out == requests ? 0 : 1;
}
