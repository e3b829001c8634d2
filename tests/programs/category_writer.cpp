// Trace points in categories "a", "b.x" and "b.y" (and a level-2 one in "b.x"), one round after
// another, 1 ms apart, until standard input reaches its end; the session comes from the
// environment (CHRONICLE_ARMED=1 starts it with every category off). After each round it
// rewrites PROGRESS_FILE with the number of rounds done, so a test can wait for rounds that
// began after a `chronicle ctl` returned.
//   category_writer PROGRESS_FILE
#include <poll.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>

#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
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
