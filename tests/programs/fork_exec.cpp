// Starts a copy of itself (fork + exec) and writes a few events in each process.
#include <sys/wait.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>

#include <cstring>

int main(int argc, char** argv) {
  const bool child = argc > 1 && std::strcmp(argv[1], "child") == 0;
  for (int i = 0; i < 100; ++i) {
    if (child)
      CHRONICLE_COUNTER("proc", "child", i);
    else
      CHRONICLE_COUNTER("proc", "parent", i);
  }
  if (child) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "child", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
