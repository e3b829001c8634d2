// What keeps the tools' HTTP servers (`metrics serve`, the exporter, `view`) answering while
// other clients hold connections open without finishing a request (a slowloris neighbour).
#pragma once

#include <httplib.h>

namespace chronicle::metrics {

// Before binding: worker threads started as connections need them (up to a bound), read, write
// and keep-alive timeouts; `listening_socket` is set to the socket the server binds, for
// widen_backlog. It must outlive the binding.
void limit_slow_clients(httplib::Server& server, int& listening_socket);

// After binding: room for many connections not yet accepted (cpp-httplib listens with 5).
void widen_backlog(int listening_socket);

}  // namespace chronicle::metrics
