// A TCP echo server and a load client, written as a plain Asio program: built with
// -DASIO_CUSTOM_HANDLER_TRACKING='"chronicle/asio_tracking.hpp"', every accept, read and write is
// a task in the trace, and the few labels and counters below add to them.
//
//   chronicle record -o echo-trace -- echo_example [connections] [messages] [message bytes]
//   chronicle dump --tasks echo-trace
//
// In one process, the server listens on 127.0.0.1 (a port the system chooses); the client opens
// the connections, sends each message and reads its echo before sending the next, then closes.
// When every connection is done the server stops accepting, and the program ends.
//
// As two processes (two hosts), each under its own `chronicle record`:
//
//   echo_example --server PORT [connections]       (0: a port the system chooses, printed)
//   echo_example --client HOST PORT [connections] [messages] [message bytes]
//
// The server ends once `connections` connections have come and gone. Every message is a line
// that begins with a W3C traceparent: the client's send_traceparent() on the way out, the
// server's on the echo. Each side handles what it reads in a ReceiveScope, so a connection is one
// trace across both processes (chronicle merge joins them).
#include <asio.hpp>
#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>
#include <chronicle/task.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using asio::ip::tcp;

struct Settings {
  int connections = 8;
  int messages = 200;
  size_t message_bytes = 64;
};

// A message on the wire: "<traceparent> <payload>\n". The traceparent has a fixed length.
constexpr size_t kTraceparentLength = 55;

std::string framed(std::string_view payload) {
  std::string line = chronicle::send_traceparent();
  line += ' ';
  line += payload;
  line += '\n';
  return line;
}

// The payload of a line read (its newline included), or nothing when it is not framed as above.
bool unframe(std::string_view line, std::string_view& traceparent, std::string_view& payload) {
  if (line.size() < kTraceparentLength + 2 || line[kTraceparentLength] != ' ' || line.back() != '\n') return false;
  traceparent = line.substr(0, kTraceparentLength);
  payload = line.substr(kTraceparentLength + 1, line.size() - kTraceparentLength - 2);
  return true;
}

// --- the server --------------------------------------------------------------------------------

class EchoSession : public std::enable_shared_from_this<EchoSession> {
 public:
  EchoSession(tcp::socket socket, int number, std::atomic<int64_t>& bytes_echoed, std::atomic<int>& open,
              std::function<void()> on_close)
      : socket_(std::move(socket)),
        number_(number),
        bytes_echoed_(bytes_echoed),
        open_(open),
        on_close_(std::move(on_close)) {
    CHRONICLE_COUNTER("echo", "open connections", ++open_);
  }
  ~EchoSession() {
    CHRONICLE_COUNTER("echo", "open connections", --open_);
    if (on_close_) on_close_();
  }

  void start() { read(); }

 private:
  void read() {
    asio::async_read_until(socket_, asio::dynamic_buffer(input_), '\n',
                           [self = shared_from_this()](std::error_code error, size_t bytes) {
                             if (error) {
                               // The client closing its end (end of file) is how every connection ends.
                               if (error != asio::error::eof)
                                 CHRONICLE_NOTE("echo", "connection {}: {}", self->number_, error.message());
                               return;
                             }
                             self->handle(bytes);
                           });
  }

  // The message continues the client's trace: the echo is sent from inside its receive.
  void handle(size_t bytes) {
    std::string_view traceparent, payload;
    const std::string line = input_.substr(0, bytes);
    input_.erase(0, bytes);
    if (!unframe(line, traceparent, payload)) {
      CHRONICLE_NOTE("echo", "connection {}: a line without a traceparent", number_);
      return;
    }
    chronicle::ReceiveScope receive(traceparent);
    CHRONICLE_SPAN("echo", "handle message");
    CHRONICLE_COUNTER("echo", "bytes echoed", bytes_echoed_ += static_cast<int64_t>(payload.size()));
    output_ = framed(payload);
    asio::async_write(socket_, asio::buffer(output_), [self = shared_from_this()](std::error_code error, size_t) {
      if (!error) self->read();
    });
  }

  tcp::socket socket_;
  int number_;
  std::atomic<int64_t>& bytes_echoed_;
  std::atomic<int>& open_;
  std::function<void()> on_close_;
  std::string input_;
  std::string output_;
};

class EchoServer {
 public:
  EchoServer(asio::io_context& io, const tcp::endpoint& endpoint) : acceptor_(io, endpoint) {}

  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  // Serves until stop(), or until `connections` connections (0: no limit) have come and gone.
  void start(int connections = 0) {
    limit_ = connections;
    accept();
  }
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
      std::make_shared<EchoSession>(std::move(socket), number, bytes_echoed_, open_, [this] { closed(); })->start();
      if (limit_ == 0 || accepted_ < limit_) accept();
    });
  }

  void closed() {
    if (limit_ != 0 && ++closed_ == limit_) acceptor_.close();
  }

  tcp::acceptor acceptor_;
  int accepted_ = 0;
  int closed_ = 0;
  int limit_ = 0;
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
        message_(settings.message_bytes, static_cast<char>('a' + number % 26)) {}

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
    output_ = framed(message_);
    asio::async_write(socket_, asio::buffer(output_), [self = shared_from_this()](std::error_code error, size_t) {
      if (error) return self->finish();
      self->receive();
    });
  }

  void receive() {
    asio::async_read_until(socket_, asio::dynamic_buffer(input_), '\n',
                           [self = shared_from_this()](std::error_code error, size_t bytes) {
                             if (error) return self->finish();
                             self->handle_echo(bytes);
                           });
  }

  // The echo continues the trace: the next message goes out from inside its receive.
  void handle_echo(size_t bytes) {
    std::string_view traceparent, payload;
    const std::string line = input_.substr(0, bytes);
    input_.erase(0, bytes);
    if (!unframe(line, traceparent, payload) || payload != message_) {
      std::fprintf(stderr, "echo: connection %d: the echo differs from the message\n", number_);
      return finish();
    }
    chronicle::ReceiveScope receive(traceparent);
    ++sent_;  // not inside the counter: its value is evaluated only while a session runs
    CHRONICLE_COUNTER("client", "round trips", sent_);
    if (sent_ < settings_.messages) return send();
    finish();
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
  std::string output_;
  std::string input_;
  int sent_ = 0;
};

int positive_argument(char** argv, int index, int argc, int fallback) {
  if (index >= argc) return fallback;
  const int value = std::atoi(argv[index]);
  return value > 0 ? value : fallback;
}

// [connections] [messages] [message bytes], from argv[first] on; defaults where absent.
Settings client_settings(char** argv, int argc, int first) {
  Settings settings;
  settings.connections = positive_argument(argv, first, argc, settings.connections);
  settings.messages = positive_argument(argv, first + 1, argc, settings.messages);
  settings.message_bytes =
      static_cast<size_t>(positive_argument(argv, first + 2, argc, static_cast<int>(settings.message_bytes)));
  return settings;
}

// Runs the client's connections to `endpoint` on this thread; true when all of them finished.
bool run_client(const tcp::endpoint& endpoint, const Settings& settings) {
  asio::io_context client_io;
  std::atomic<int> finished{0};
  for (int i = 1; i <= settings.connections; ++i)
    std::make_shared<LoadConnection>(client_io, i, settings, finished)->start(endpoint);
  chronicle::set_thread_name("client");
  client_io.run();
  std::printf("echo: %d connections x %d messages of %zu bytes, %d finished\n", settings.connections, settings.messages,
              settings.message_bytes, finished.load());
  return finished.load() == settings.connections;
}

int serve(char** argv, int argc) {
  const int port = std::atoi(argv[2]);
  const int connections = positive_argument(argv, 3, argc, 1);
  asio::io_context io;
  EchoServer server(io, tcp::endpoint(asio::ip::address_v4::any(), static_cast<unsigned short>(port)));
  server.start(connections);
  std::printf("echo: listening on port %u\n", server.port());
  std::fflush(stdout);
  chronicle::set_thread_name("server");
  io.run();
  return 0;
}

int connect_to(char** argv, int argc) {
  const Settings settings = client_settings(argv, argc, 4);
  std::error_code error;
  const auto address = asio::ip::make_address(argv[2], error);
  if (error) {
    std::fprintf(stderr, "echo: %s is not an IP address\n", argv[2]);
    return 2;
  }
  return run_client(tcp::endpoint(address, static_cast<unsigned short>(std::atoi(argv[3]))), settings) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--server") == 0) return serve(argv, argc);
  if (argc >= 4 && std::strcmp(argv[1], "--client") == 0) return connect_to(argv, argc);
  if (argc >= 2 && argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: echo_example [connections] [messages] [message bytes]\n"
                 "       echo_example --server PORT [connections]\n"
                 "       echo_example --client HOST PORT [connections] [messages] [message bytes]\n");
    return 2;
  }
  const Settings settings = client_settings(argv, argc, 1);

  asio::io_context server_io;
  EchoServer server(server_io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  server.start();
  std::thread server_thread([&server_io] {
    chronicle::set_thread_name("server");
    server_io.run();
  });
  const bool all_finished = run_client(tcp::endpoint(asio::ip::address_v4::loopback(), server.port()), settings);
  server.stop();
  server_thread.join();
  return all_finished ? 0 : 1;
}
