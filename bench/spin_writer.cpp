// A trace point in category "x", flat out, until standard input reaches its end: the program
// `ctl_latency` switches on from outside. The session comes from the environment.
#include <poll.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>

int main() {
  for (;;) {
    for (int i = 0; i < 1024; ++i) CHRONICLE_INSTANT("x", "spin");
    pollfd input{STDIN_FILENO, POLLIN, 0};
    if (poll(&input, 1, 0) > 0) {
      char byte;
      if (read(STDIN_FILENO, &byte, 1) <= 0) return 0;
    }
  }
}
