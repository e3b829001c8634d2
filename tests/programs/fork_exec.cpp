// Starts a copy of itself (fork + exec) and writes a few events in each process.
//   fork_exec            the parent, then its exec'd child ("child")
//   fork_exec fork-only  the parent, then a child forked without exec ("forked"), which ends
//                        with exit() (its atexit handlers run) or, with a second argument
//                        "_exit", with _exit()
#include <sys/wait.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>

#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const bool child = argc > 1 && std::strcmp(argv[1], "child") == 0;
  const bool fork_only = argc > 1 && std::strcmp(argv[1], "fork-only") == 0;
  for (int i = 0; i < 100; ++i) {
    if (child)
      CHRONICLE_COUNTER("proc", "child", i);
    else
      CHRONICLE_COUNTER("proc", "parent", i);
  }
  if (child) return 0;
  pid_t pid = fork();
  if (pid == 0 && fork_only) {
    for (int i = 0; i < 100; ++i) CHRONICLE_COUNTER("proc", "forked", i);
    if (argc > 2 && std::strcmp(argv[2], "_exit") == 0) _exit(0);
    std::exit(0);
  }
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "child", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
