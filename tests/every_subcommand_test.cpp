// Every `chronicle` subcommand, each family of its flags, on each kind of trace the project makes:
// plain, sampled (--sample --sched, spans nested), compressed, rotated, merged, flight mode, and a
// snapshot of a running program. The point is the build it runs in: under ASan+UBSan (CI's
// `cli` label) a read out of bounds or of freed memory anywhere in a tool aborts it, and the
// command fails here. Each command must also end as documented (exit 0, or 2 where the trace lacks
// what the command asks for) and print no warning of a sanitizer.
#include <gtest/gtest.h>

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support.hpp"

namespace chronicle::test {
namespace {

const std::string kCli = CHRONICLE_CLI;
const std::string kEcho = ECHO_EXAMPLE;
const std::string kCoroutines = COROUTINES_EXAMPLE;
const std::string kWorkload = PROFILE_WORKLOAD;
const std::string kMetricsWriter = METRICS_WRITER;

struct Command {
  std::string arguments;        // after `chronicle`; TRACE and OUT are replaced
  std::vector<int> exit_codes;  // what it may end with
};

void expect_clean(const CommandResult& result, const std::string& command, const std::vector<int>& exit_codes) {
  const bool expected = std::find(exit_codes.begin(), exit_codes.end(), result.exit_code) != exit_codes.end();
  EXPECT_TRUE(expected) << command << "\nexit " << result.exit_code << "\n" << result.err.substr(0, 4000);
  for (const char* word : {"Sanitizer", "runtime error:", "LeakSanitizer"})
    EXPECT_EQ(result.err.find(word), std::string::npos) << command << "\n" << result.err.substr(0, 8000);
}

std::string replaced(std::string text, const std::string& trace, const std::string& out, const std::string& task = "") {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"TRACE", trace}, {"OUT", out}, {"TASK", task}})
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  return text;
}

// The reading subcommands with each family of their flags. A command that needs what a trace may
// not have (samples, counters) may refuse it with 2.
const std::vector<Command>& reading_commands() {
  static const std::vector<Command> commands = {
      {"dump TRACE", {0}},
      {"dump --category '*' --name '*' --limit 500 TRACE", {0}},
      {"dump --tasks TRACE", {0}},
      {"dump --tasks --name '*' --limit 20 TRACE", {0}},
      {"stats TRACE", {0}},
      {"stats --json --top 5 TRACE", {0}},
      {"stats --last 1s TRACE", {0}},
      {"stats --since +0s TRACE", {0}},
      {"stats --counters TRACE", {0, 2}},
      {"stats --counters --json --name '*' TRACE", {0, 2}},
      {"stats --critical-path TASK TRACE", {0}},
      {"stats --profile TRACE", {0, 2}},
      {"stats --profile --by-span TRACE", {0, 2}},
      {"stats --profile --by-task --json TRACE", {0, 2}},
      {"stats --profile --folded TRACE", {0, 2}},
      {"export --format chrome -o OUT/chrome.json TRACE", {0}},
      {"export --format otlp -o OUT/otlp.json TRACE", {0}},
      {"export --format sqlite -o OUT/trace.sqlite TRACE", {0}},
      {"view --html OUT/page.html TRACE", {0}},
      {"view --no-cache --html OUT/uncached.html TRACE", {0}},
      {"convert TRACE OUT/converted", {0}},
      {"merge -o OUT/merged TRACE", {0}},
  };
  return commands;
}

// `chronicle view --port 0 TRACE` as a process, asked every API route, then stopped by SIGTERM.
void query_the_viewer(const std::string& trace) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  TemporaryDirectory scratch;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const std::string errors = scratch / "err";
    freopen(errors.c_str(), "w", stderr);
    execl(kCli.c_str(), kCli.c_str(), "view", "--port", "0", trace.c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
  close(out[0]);
  const size_t colon = line.rfind(':');
  ASSERT_NE(colon, std::string::npos) << "no address printed: " << line;
  const int port = std::atoi(line.c_str() + colon + 1);
  ASSERT_GT(port, 0) << line;
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  for (const char* route :
       {"/api/summary", "/api/window?begin=0&width=800", "/api/window?begin=0&width=800&rows=0-200",
        "/api/window?begin=0&end=1000&width=3&rows=5-9", "/api/span?lane=0&depth=0&index=0", "/api/task?index=0",
        "/api/task?index=4000000000", "/api/search?q=a&limit=50", "/api/counter?index=0", "/api/stats", "/api/flame",
        "/api/flame?by=thread", "/api/flame?source=samples", "/", "/no-such-page"}) {
    const httplib::Result answer = client.Get(route);
    ASSERT_TRUE(answer) << route << ": " << httplib::to_string(answer.error());
    EXPECT_TRUE(answer->status == 200 || answer->status == 400 || answer->status == 404)
        << route << " " << answer->status;
  }
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::string err;
  if (FILE* file = std::fopen((scratch / "err").c_str(), "r")) {
    for (int ch; (ch = std::fgetc(file)) != EOF;) err += static_cast<char>(ch);
    std::fclose(file);
  }
  expect_clean(CommandResult{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), "", err},
               "view --port 0 " + trace, {0});
}

// The id of the trace's first task ("t1.1"), or "" when it has none.
std::string first_task(const std::string& trace) {
  const auto tasks = run(kCli + " dump --tasks --limit 1 " + trace);
  const size_t line = tasks.out.find("\nt");
  return line == std::string::npos ? "" : tasks.out.substr(line + 1, tasks.out.find(' ', line) - line - 1);
}

void run_every_reading_command(const std::string& trace) {
  const std::string task = first_task(trace);
  for (const Command& command : reading_commands()) {
    if (task.empty() && command.arguments.find("TASK") != std::string::npos) continue;
    TemporaryDirectory out;
    const std::string line = kCli + " " + replaced(command.arguments, trace, out.path(), task);
    SCOPED_TRACE(line);
    expect_clean(run(line), line, command.exit_codes);
  }
  query_the_viewer(trace);
}

void record(const std::string& flags, const std::string& program, const std::string& trace) {
  const std::string line = kCli + " record -q " + flags + " -o " + trace + " -- " + program;
  const auto recorded = run(line);
  ASSERT_EQ(recorded.exit_code, 0) << line << "\n" << recorded.err;
  expect_clean(recorded, line, {0});
}

TEST(EverySubcommand, OnAPlainTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("", kEcho + " 2 30", directory / "trace"));
  run_every_reading_command(directory / "trace");
}

TEST(EverySubcommand, OnACoroutineTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("", kCoroutines, directory / "trace"));
  run_every_reading_command(directory / "trace");
}

// Samples and context switches (the timer sampler stands in where perf events are refused), and
// spans three deep begun and ended in turns.
TEST(EverySubcommand, OnASampledTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("--sample --sched", kWorkload + " nested 3", directory / "trace"));
  run_every_reading_command(directory / "trace");
}

TEST(EverySubcommand, OnACompressedTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("--compress", kEcho + " 2 30", directory / "trace"));
  run_every_reading_command(directory / "trace");
}

TEST(EverySubcommand, OnARotatedTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("--rotate 64K --buffer-size 128K", kEcho + " 4 200", directory / "trace"));
  ASSERT_TRUE(std::filesystem::exists(directory / "trace/chunk-000002")) << "fewer than two chunks";
  run_every_reading_command(directory / "trace");
}

TEST(EverySubcommand, OnAMergedTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("", kEcho + " 2 30", directory / "one"));
  ASSERT_NO_FATAL_FAILURE(record("--compress", kCoroutines, directory / "two"));
  const std::string line =
      kCli + " merge -o " + (directory / "merged") + " " + (directory / "one") + " " + (directory / "two");
  ASSERT_NO_FATAL_FAILURE(expect_clean(run(line), line, {0}));
  run_every_reading_command(directory / "merged");
}

// Flight mode with a ring too small for the run: each thread's ring covers another window.
TEST(EverySubcommand, OnAFlightTrace) {
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record("--mode flight --buffer-size 128K", kEcho + " 4 200", directory / "trace"));
  run_every_reading_command(directory / "trace");
}

// stats on such a trace summarises what the windows leave out in one block (issue: a warning per
// task, ~200 of them), and --verbose names each task; the JSON says the same figures.
TEST(FlightStats, WhatBeginsBeforeAThreadsWindowIsSummarisedOnce) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record("--mode flight --buffer-size 128K", kEcho + " 4 2000", trace));
  const auto stats = run(kCli + " stats " + trace);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.err.find("is never created"), std::string::npos) << stats.err;
  const std::string summary = "spans begin before their thread's window";
  ASSERT_NE(stats.err.find(summary), std::string::npos) << stats.err;
  EXPECT_EQ(stats.err.find(summary), stats.err.rfind(summary)) << stats.err;
  EXPECT_NE(stats.err.find("windows per thread, shortest first: "), std::string::npos) << stats.err;

  const auto verbose = run(kCli + " stats --verbose " + trace);
  const auto json = run(kCli + " stats --json " + trace);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json figures = nlohmann::json::parse(json.out);
  ASSERT_TRUE(figures.contains("flight_windows")) << json.out.substr(0, 2000);
  const uint64_t before = figures["flight_windows"]["tasks_before_window"].get<uint64_t>();
  EXPECT_GT(before, 0u) << "the run is longer than a 128 KiB ring: tasks begin before the windows";
  size_t named = 0;
  for (size_t at = verbose.err.find("begins before its thread's window"); at != std::string::npos;
       at = verbose.err.find("begins before its thread's window", at + 1))
    ++named;
  EXPECT_EQ(named, before) << verbose.err.substr(0, 2000);
  EXPECT_EQ(figures["flight_windows"]["windows"].size(), figures["threads"].size());
}

// The live subcommands on a running program (its session in flight mode), and the snapshot they
// take read like any trace.
TEST(EverySubcommand, OnARunningProgramAndItsSnapshot) {
  TemporaryDirectory directory;
  // Started here rather than through a shell, so that its pid is known (other tests may run
  // another metrics_writer meanwhile); it runs until its standard input closes.
  int input[2];
  ASSERT_EQ(pipe(input), 0);
  const std::string output = "CHRONICLE_OUTPUT=" + (directory / "unused");
  const pid_t child = fork();
  if (child == 0) {
    dup2(input[0], STDIN_FILENO);
    close(input[0]);
    close(input[1]);
    putenv(const_cast<char*>(output.c_str()));
    putenv(const_cast<char*>("CHRONICLE_MODE=flight"));
    execl(kMetricsWriter.c_str(), kMetricsWriter.c_str(), "2", nullptr);
    _exit(127);
  }
  close(input[0]);
  const std::string pid = std::to_string(child);
  bool answered = false;
  for (int attempt = 0; attempt < 600 && !answered; ++attempt) {
    answered = run(kCli + " metrics show " + pid).exit_code == 0;
    if (!answered) usleep(50'000);
  }
  ASSERT_TRUE(answered) << "the program's metrics never appeared";
  for (const Command& command : std::vector<Command>{
           {"metrics show PID", {0}},
           {"metrics query PID requests", {0, 2}},
           {"top PID --once", {0}},
           {"top PID --iterations 2 --interval 100ms --sort rate", {0}},
           {"ctl PID status", {0}},
           {"ctl PID disable '*'", {0}},
           {"ctl PID enable '*'", {0}},
           {"ctl PID level '*' 3", {0}},
           {"snapshot PID -o OUT/snapshot", {0}},
       }) {
    std::string line = kCli + " " + replaced(command.arguments, "", directory.path());
    for (size_t at = line.find("PID"); at != std::string::npos; at = line.find("PID")) line.replace(at, 3, pid);
    SCOPED_TRACE(line);
    expect_clean(run(line), line, command.exit_codes);
  }
  close(input[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  run_every_reading_command(directory / "snapshot");
}

}  // namespace
}  // namespace chronicle::test
