// A request to a loopback HTTP server while other clients starve it: 300 slowloris connections,
// each sending a header byte a second (under a per-read timeout), more than the server has
// workers, and 100 idle ones. The servers' rules (src/http/http_limits.hpp) must still answer.
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "support.hpp"

namespace chronicle::test {

inline httplib::Result get_while_starved(uint16_t port, const std::string& path) {
  const TricklingConnections slowloris(port, 300);
  EXPECT_EQ(slowloris.opened(), 300u);
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i)
    if (const int fd = open_idle_connection(port); fd >= 0) idle.push_back(fd);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(10));
  client.set_read_timeout(std::chrono::seconds(10));
  httplib::Result answer = client.Get(path);
  for (const int fd : idle) ::close(fd);
  return answer;
}

}  // namespace chronicle::test
