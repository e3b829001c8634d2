// How soon a `chronicle ctl enable` takes effect in a running program, end to end: spin_writer
// (armed, its trace point in category "x" running flat out) is started, `chronicle ctl PID enable
// x` is run as a user runs it, and the trace is read back. Per round:
//   round trip     from spawning ctl to its exit, as the caller waits for it
//   after return   first "x" event minus the moment ctl had returned (negative: in effect before)
//   after change   first "x" event minus the time of ctl's note (when the states changed)
//   ctl_latency CHRONICLE_CLI SPIN_WRITER [ROUNDS]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "reader/trace_reader.hpp"

namespace fs = std::filesystem;
extern char** environ;

namespace {

int64_t realtime_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

int run_and_wait(const std::vector<std::string>& arguments, bool quiet) {
  std::vector<char*> argv;
  for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int failed = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Round {
  double round_trip_us = 0;
  double after_return_us = 0;
  double after_change_us = 0;
};

bool one_round(const std::string& cli, const std::string& writer, const fs::path& directory, Round& out) {
  int input[2];
  if (pipe(input) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(input[0], STDIN_FILENO);
    close(input[0]);
    close(input[1]);
    setenv("CHRONICLE_ARMED", "1", 1);
    setenv("CHRONICLE_OUTPUT", (directory / "trace").c_str(), 1);
    execl(writer.c_str(), writer.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(input[0]);
  const std::string target = std::to_string(pid);
  // Its session is up once ctl can read its category.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (run_and_wait({cli, "ctl", target, "status"}, true) != 0) {
    if (std::chrono::steady_clock::now() > limit) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the trace point has run (interned)
  const int64_t spawned = realtime_ns();
  const int answered = run_and_wait({cli, "ctl", target, "enable", "x"}, true);
  const int64_t returned = realtime_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  close(input[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (answered != 0) return false;
  chronicle::reader::Trace trace((directory / "trace").string());
  int64_t first = 0;
  int64_t change = 0;
  trace.for_each_event([&](const chronicle::reader::Event& event) {
    const chronicle::reader::Site* site = trace.site(event.name_id);
    if (!site) return true;
    if (site->category == "chronicle" && change == 0) change = trace.to_unix_ns(event.ticks);
    if (site->category == "x" && first == 0) first = trace.to_unix_ns(event.ticks);
    return first == 0 || change == 0;
  });
  fs::remove_all(directory);
  if (first == 0 || change == 0) return false;
  out = {(returned - spawned) / 1e3, (first - returned) / 1e3, (first - change) / 1e3};
  return true;
}

void summarize(const char* what, std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) { return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))]; };
  fmt::print("{:<14} min {:9.1f}  median {:9.1f}  p90 {:9.1f}  max {:9.1f} us\n", what, values.front(), at(0.5),
             at(0.9), values.back());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: ctl_latency CHRONICLE_CLI SPIN_WRITER [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 20;
  const fs::path base = fs::temp_directory_path() / fmt::format("chronicle-ctl-latency-{}", getpid());
  std::vector<double> trip, after_return, after_change;
  for (int k = 0; k < rounds; ++k) {
    Round round;
    if (!one_round(argv[1], argv[2], base / std::to_string(k), round)) {
      fmt::print(stderr, "round {} failed\n", k);
      continue;
    }
    trip.push_back(round.round_trip_us);
    after_return.push_back(round.after_return_us);
    after_change.push_back(round.after_change_us);
  }
  fs::remove_all(base);
  if (trip.empty()) return 1;
  fmt::print("{} rounds\n", trip.size());
  summarize("round trip", trip);
  summarize("after return", after_return);
  summarize("after change", after_change);
  return 0;
}
