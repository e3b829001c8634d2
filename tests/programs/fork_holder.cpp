// Starts a session (no collector, the mapping kept), traces, forks a child that does not exec
// and lives on, prints "<shm path> <child pid>", then waits to be killed.
#include <signal.h>
#include <unistd.h>

#include <chronicle/chronicle.hpp>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  chronicle::Config config;
  config.shm_dir = argv[1];
  config.keep_shm = true;
  if (!chronicle::start(config)) return 1;
  for (int i = 0; i < 100; ++i) CHRONICLE_COUNTER("fork", "before", i);
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 100; ++i) CHRONICLE_COUNTER("fork", "child", i);  // not into the parent's rings
    for (;;) pause();
  }
  std::printf("%s %d\n", chronicle::shm_path().c_str(), static_cast<int>(child));
  std::fflush(stdout);
  for (;;) pause();
}
