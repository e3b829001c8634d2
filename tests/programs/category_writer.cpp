// Trace points in categories "a", "b.x" and "b.y" (and a level-2 one in "b.x"), one round after
// another, 1 ms apart, until standard input reaches its end; the session comes from the
// environment (CHRONICLE_ARMED=1 starts it with every category off). After each round it
// rewrites PROGRESS_FILE with the number of rounds done, so a test can wait for rounds that
// began after a `chronicle ctl` returned. With CATEGORY_WRITER_STALL_AFTER_REQUEST set, the
// program stops itself (SIGSTOP, as a debugger would) once, right after its control thread took
// the first ctl request and before it answers (tests/ctl_test.cpp).
//   category_writer PROGRESS_FILE
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "recorder/test_pause.hpp"

namespace {

void stall_after_first_request(chronicle::recorder::TestPoint point) {
  static std::atomic<bool> stalled{false};
  if (point == chronicle::recorder::TestPoint::control_request_taken && !stalled.exchange(true)) raise(SIGSTOP);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (std::getenv("CATEGORY_WRITER_STALL_AFTER_REQUEST"))
    chronicle::recorder::g_test_pause.store(stall_after_first_request);
  const std::string progress = argv[1];
  for (long round = 1;; ++round) {
    CHRONICLE_INSTANT("a", "a");
    CHRONICLE_INSTANT("b.x", "bx");
    CHRONICLE_INSTANT("b.y", "by");
    CHRONICLE_INSTANT_V("b.x", "bx verbose", 2);
    {
      std::ofstream out(progress + ".tmp");
      out << round << '\n';
    }
    std::rename((progress + ".tmp").c_str(), progress.c_str());
    pollfd input{STDIN_FILENO, POLLIN, 0};
    if (poll(&input, 1, 1) > 0) {
      char byte;
      if (read(STDIN_FILENO, &byte, 1) <= 0) return 0;
    }
  }
}
