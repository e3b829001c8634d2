// A TCP echo server and a load client in one process, written as a plain Asio program: built
// with -DASIO_CUSTOM_HANDLER_TRACKING='"chronicle/asio_tracking.hpp"', every accept, read and
// write is a task in the trace, and the few labels and counters below add to them.
//
//   chronicle record -o echo-trace -- echo_example [connections] [messages] [message bytes]
//   chronicle dump --tasks echo-trace
//
// The server listens on 127.0.0.1 (a port the system chooses); the client opens the
// connections, sends each message and reads its echo before sending the next, then closes.
// When every connection is done the server stops accepting, and the program ends.
#include <asio.hpp>
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using asio::ip::tcp;

struct Settings {
  int connections = 8;
  int messages = 200;
  size_t message_bytes = 64;
};

// --- the server --------------------------------------------------------------------------------

class EchoSession : public std::enable_shared_from_this<EchoSession> {
 public:
  EchoSession(tcp::socket socket, int number, std::atomic<int64_t>& bytes_echoed, std::atomic<int>& open)
      : socket_(std::move(socket)), number_(number), bytes_echoed_(bytes_echoed), open_(open) {
    CHRONICLE_COUNTER("echo", "open connections", ++open_);
  }
  ~EchoSession() { CHRONICLE_COUNTER("echo", "open connections", --open_); }

  void start() { read(); }

 private:
  void read() {
    socket_.async_read_some(asio::buffer(data_), [self = shared_from_this()](std::error_code error, size_t bytes) {
      if (error) {
        // The client closing its end (end of file) is how every connection ends.
        if (error != asio::error::eof) CHRONICLE_NOTE("echo", "connection {}: {}", self->number_, error.message());
        return;
      }
      CHRONICLE_COUNTER("echo", "bytes echoed", self->bytes_echoed_ += static_cast<int64_t>(bytes));
      self->write(bytes);
    });
  }

  void write(size_t bytes) {
    asio::async_write(socket_, asio::buffer(data_, bytes), [self = shared_from_this()](std::error_code error, size_t) {
      if (!error) self->read();
    });
  }

  tcp::socket socket_;
  int number_;
  std::atomic<int64_t>& bytes_echoed_;
  std::atomic<int>& open_;
  std::array<char, 4096> data_{};
};

class EchoServer {
 public:
  explicit EchoServer(asio::io_context& io) : acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {}

  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void start() { accept(); }
  // Called from another thread: the acceptor belongs to the server's io_context.
  void stop() {
    asio::post(acceptor_.get_executor(), [this] { acceptor_.close(); });
  }

 private:
  void accept() {
    acceptor_.async_accept([this](std::error_code error, tcp::socket socket) {
      if (error) return;  // closed by stop()
      const int number = ++accepted_;
      chronicle::label_task(chronicle::current_task(), "accept connection " + std::to_string(number));
      std::make_shared<EchoSession>(std::move(socket), number, bytes_echoed_, open_)->start();
      accept();
    });
  }

  tcp::acceptor acceptor_;
  int accepted_ = 0;
  std::atomic<int64_t> bytes_echoed_{0};
  std::atomic<int> open_{0};
};

// --- the load client ---------------------------------------------------------------------------

class LoadConnection : public std::enable_shared_from_this<LoadConnection> {
 public:
  LoadConnection(asio::io_context& io, int number, const Settings& settings, std::atomic<int>& finished)
      : socket_(io),
        number_(number),
        settings_(settings),
        finished_(finished),
        message_(settings.message_bytes, static_cast<char>('a' + number % 26)),
        reply_(settings.message_bytes) {}

  void start(const tcp::endpoint& server) {
    socket_.async_connect(server, [self = shared_from_this()](std::error_code error) {
      if (error) {
        std::fprintf(stderr, "echo: connection %d: %s\n", self->number_, error.message().c_str());
        self->finish();
        return;
      }
      chronicle::label_task(chronicle::current_task(), "client " + std::to_string(self->number_) + " connected");
      self->send();
    });
  }

 private:
  void send() {
    asio::async_write(socket_, asio::buffer(message_), [self = shared_from_this()](std::error_code error, size_t) {
      if (error) return self->finish();
      self->receive();
    });
  }

  void receive() {
    asio::async_read(socket_, asio::buffer(reply_), [self = shared_from_this()](std::error_code error, size_t) {
      if (error) return self->finish();
      CHRONICLE_COUNTER("client", "round trips", ++self->sent_);
      if (self->sent_ < self->settings_.messages) return self->send();
      self->finish();
    });
  }

  void finish() {
    std::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    ++finished_;
  }

  tcp::socket socket_;
  int number_;
  const Settings& settings_;
  std::atomic<int>& finished_;
  std::string message_;
  std::vector<char> reply_;
  int sent_ = 0;
};

int positive_argument(char** argv, int index, int argc, int fallback) {
  if (index >= argc) return fallback;
  const int value = std::atoi(argv[index]);
  return value > 0 ? value : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  settings.connections = positive_argument(argv, 1, argc, settings.connections);
  settings.messages = positive_argument(argv, 2, argc, settings.messages);
  settings.message_bytes =
      static_cast<size_t>(positive_argument(argv, 3, argc, static_cast<int>(settings.message_bytes)));

  asio::io_context server_io;
  EchoServer server(server_io);
  server.start();
  std::thread server_thread([&server_io] {
    chronicle::set_thread_name("server");
    server_io.run();
  });

  asio::io_context client_io;
  std::atomic<int> finished{0};
  const tcp::endpoint endpoint(asio::ip::address_v4::loopback(), server.port());
  for (int i = 1; i <= settings.connections; ++i)
    std::make_shared<LoadConnection>(client_io, i, settings, finished)->start(endpoint);
  chronicle::set_thread_name("client");
  client_io.run();

  server.stop();
  server_thread.join();
  std::printf("echo: %d connections x %d messages of %zu bytes, %d finished\n", settings.connections, settings.messages,
              settings.message_bytes, finished.load());
  return finished.load() == settings.connections ? 0 : 1;
}
