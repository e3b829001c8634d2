// What keeps the tools' HTTP servers (`metrics serve`, the exporter, `view`) answering while
// other local users hold connections open without finishing a request (idle or slowloris
// clients), and what bounds the connections they may hold.
//
// The rules (docs/guarantees.md, "The HTTP servers"):
// - A connection waits for a whole request head (request line and headers) without a worker
//   thread: one thread polls every waiting connection. The head must be whole within 5 s of the
//   wait's start (the connection's accept, or the end of its previous answer): a deadline per
//   request, not per read, so a byte every few seconds does not keep it open.
// - The body and the answer of a request have 30 s in all.
// - At most 512 connections in all and 256 per peer address; a connection past either cap
//   closes the oldest one still waiting for its head (of that peer first), or is closed itself
//   when every one is being answered.
// - A kept-alive connection goes back to waiting between requests: it holds no worker.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>

namespace chronicle::metrics {

// The bounds above; tests give smaller ones to reach them.
struct HttpLimits {
  std::chrono::milliseconds head_timeout = std::chrono::seconds(5);
  size_t max_connections = 512;
  size_t max_connections_per_peer = 256;
};

class BoundedHttpServer final : public httplib::Server {
 public:
  explicit BoundedHttpServer(HttpLimits limits = {});
  // The owner has stopped the server (stop()) and joined its listening thread before.
  ~BoundedHttpServer() override;
  BoundedHttpServer(const BoundedHttpServer&) = delete;
  BoundedHttpServer& operator=(const BoundedHttpServer&) = delete;

  // After binding: room for many connections not yet accepted (cpp-httplib listens with 5).
  void widen_backlog();

 private:
  // Called by cpp-httplib's listening loop for each accepted connection: hands it to the
  // waiting room and returns at once.
  bool process_and_close_socket(socket_t socket) override;

  struct Connections;
  std::unique_ptr<Connections> connections_;
  int listening_socket_ = -1;  // the last socket cpp-httplib made to listen on
};

}  // namespace chronicle::metrics
