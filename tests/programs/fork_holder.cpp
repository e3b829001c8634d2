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
  int child_ready[2];
  if (pipe(child_ready) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 100; ++i) CHRONICLE_COUNTER("fork", "child", i);  // not into the parent's rings
    // The fork handlers have run: tell the parent, so the test does not race them.
    if (write(child_ready[1], "r", 1) != 1) return 1;
    for (;;) pause();
  }
  char ready = 0;
  if (read(child_ready[0], &ready, 1) != 1) return 1;
  std::printf("%s %d\n", chronicle::shm_path().c_str(), static_cast<int>(child));
  std::fflush(stdout);
  for (;;) pause();
}
