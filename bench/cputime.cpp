// cputime COMMAND ARGS...: runs COMMAND and reports, apart, the CPU time of the command's own
// process and that of the children it waited for (for `chronicle record`: the recorder vs the
// traced program).
//
// The command's own time is read from /proc/PID/stat while it is a zombie (waitid WNOWAIT),
// in clock ticks (1/100 s); the total of the process tree from wait4's rusage (microseconds).
// Prints one line on stderr; exits with the command's status.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

double seconds_of(const timeval& time) {
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6;
}

struct StatTimes {
  double utime = -1, stime = -1, cutime = -1, cstime = -1;
};

StatTimes read_stat(pid_t pid) {
  StatTimes times;
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return times;
  std::istringstream fields(text.substr(paren + 1));
  std::vector<std::string> words{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
  if (words.size() < 15) return times;
  // words[0] is field 3 (state); utime..cstime are fields 14..17.
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  times.utime = std::stod(words[11]) / hz;
  times.stime = std::stod(words[12]) / hz;
  times.cutime = std::stod(words[13]) / hz;
  times.cstime = std::stod(words[14]) / hz;
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cputime COMMAND [ARGS...]\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  pid_t child = 0;
  if (int failed = posix_spawnp(&child, argv[1], nullptr, nullptr, argv + 1, environ); failed != 0) {
    std::fprintf(stderr, "cputime: cannot run %s: %s\n", argv[1], std::strerror(failed));
    return 127;
  }
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR) {
      std::perror("cputime: waitid");
      return 127;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const StatTimes own = read_stat(child);  // still a zombie: its /proc entry is readable
  int status = 0;
  rusage usage{};
  wait4(child, &status, 0, &usage);
  const double total = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  std::fprintf(stderr,
               "cputime: wall=%.3f self_user=%.2f self_sys=%.2f children_user=%.2f children_sys=%.2f "
               "tree_user=%.3f tree_sys=%.3f tree_total=%.3f tree_voluntary_switches=%ld "
               "tree_involuntary_switches=%ld\n",
               wall, own.utime, own.stime, own.cutime, own.cstime, seconds_of(usage.ru_utime),
               seconds_of(usage.ru_stime), total, usage.ru_nvcsw, usage.ru_nivcsw);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
