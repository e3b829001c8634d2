// `chronicle record -- PROGRAM ARGS...`: runs a program with tracing on and drains its rings
// (and those of the processes it starts) into a trace directory while it runs.
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "cli/common.hpp"
#include "collector/collector.hpp"
#include "recorder/environment.hpp"

extern char** environ;

namespace chronicle::cli {
namespace {

struct RecordOptions {
  std::string output;
  std::string mode = "stream";
  std::string buffer_size = "4M";
  std::string categories = "*";
  bool keep_shm = false;
  bool quiet = false;
  std::vector<std::string> command;
};

struct TrackedSession {
  std::unique_ptr<collector::SessionMapping> mapping;
  std::unique_ptr<collector::Collector> collector;
  bool done = false;
};

volatile sig_atomic_t g_forward_signal = 0;
void remember_signal(int signal) {
  g_forward_signal = signal;
}

std::string describe_status(const std::string& program, int status) {
  if (WIFEXITED(status)) return fmt::format("{} exited with status {}", program, WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("{} was killed by signal {} ({})", program, WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("{} ended (status 0x{:x})", program, status);
}

int run_record(RecordOptions& options) {
  namespace fs = std::filesystem;
  if (options.mode != "stream" && options.mode != "flight")
    throw std::invalid_argument(fmt::format("--mode {}: expected stream or flight", options.mode));
  recorder::parse_size(options.buffer_size);  // reject a bad size here rather than in the child
  const std::string program = options.command.front();
  if (options.output.empty())
    options.output = fmt::format("chronicle-{}-{}", fs::path(program).filename().string(), timestamp_for_path());
  std::error_code error;
  const bool output_existed = fs::exists(options.output, error);
  if (output_existed && !fs::is_empty(options.output, error))
    throw std::runtime_error(
        fmt::format("{} exists and is not empty: choose another directory with -o", options.output));
  fs::create_directories(options.output, error);
  if (error) throw std::runtime_error(fmt::format("cannot create {}: {}", options.output, error.message()));
  // A run that wrote nothing leaves no empty directory to trip over (the next record into it,
  // a script looking for traces). Only the directory itself: parents made above stay.
  auto remove_output_if_empty = [&options, output_existed] {
    std::error_code ignored;
    if (!output_existed && fs::is_empty(options.output, ignored)) fs::remove(options.output, ignored);
  };

  // The programs put their mappings here; we find them by listing it.
  const std::string shm_dir = fmt::format("/dev/shm/chronicle-record-{}", getpid());
  fs::remove_all(shm_dir, error);
  if (mkdir(shm_dir.c_str(), 0700) != 0) {
    const int failure = errno;
    remove_output_if_empty();
    throw std::runtime_error(fmt::format("cannot create {}: {}", shm_dir, std::strerror(failure)));
  }

  setenv(recorder::kEnvOutput, options.output.c_str(), 1);
  setenv(recorder::kEnvCollector, "external", 1);
  setenv(recorder::kEnvShmDir, shm_dir.c_str(), 1);
  setenv(recorder::kEnvMode, options.mode.c_str(), 1);
  setenv(recorder::kEnvBufferSize, options.buffer_size.c_str(), 1);
  setenv(recorder::kEnvCategories, options.categories.c_str(), 1);

  std::vector<char*> argv;
  for (auto& word : options.command) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t child = 0;
  if (int failed = posix_spawnp(&child, argv[0], nullptr, nullptr, argv.data(), environ); failed != 0) {
    fs::remove_all(shm_dir, error);
    remove_output_if_empty();
    throw std::runtime_error(fmt::format("cannot run {}: {}", program, std::strerror(failed)));
  }
  // Ctrl-C reaches the program too (same process group); we stay to collect what it leaves.
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::map<std::string, TrackedSession> sessions;
  bool child_running = true;
  int status = 0;
  const bool progress = stderr_is_terminal() && !options.quiet;
  auto last_progress = std::chrono::steady_clock::now();
  auto idle_sleep = std::chrono::microseconds(500);
  auto totals = [&sessions] {
    collector::CollectorStats sum;
    for (auto& [path, session] : sessions) {
      if (!session.collector) continue;
      const auto& stats = session.collector->stats();
      sum.events += stats.events;
      sum.bytes += stats.bytes;
      sum.discarded += stats.discarded;
      sum.decode_errors += stats.decode_errors;
      sum.packets_unwritten += stats.packets_unwritten;
      sum.events_unwritten += stats.events_unwritten;
      sum.bytes_unwritten += stats.bytes_unwritten;
      sum.events_no_channel += stats.events_no_channel;
      sum.definitions_dropped += stats.definitions_dropped;
    }
    return sum;
  };

  while (true) {
    if (g_forward_signal == SIGTERM && child_running) {
      kill(child, SIGTERM);
      g_forward_signal = 0;
    }
    // New sessions (a program starting, or one of its children).
    for (const auto& entry : fs::directory_iterator(shm_dir, error)) {
      const std::string path = entry.path().string();
      if (entry.path().extension() != ".shm" || sessions.count(path)) continue;
      try {
        auto mapping = std::make_unique<collector::SessionMapping>(path);
        const auto& header = mapping->header();
        std::string directory = options.output;
        if (!sessions.empty())
          directory = fmt::format("{}/{}-{}", options.output,
                                  std::string(header.process_name, strnlen(header.process_name, 64)), header.pid);
        TrackedSession tracked;
        tracked.collector = std::make_unique<collector::Collector>(*mapping, directory);
        tracked.mapping = std::move(mapping);
        sessions.emplace(path, std::move(tracked));
      } catch (const std::exception&) {
        // Not yet initialised by its writer (the magic is written last): try again next round.
      }
    }
    size_t work = 0;
    bool all_done = true;
    for (auto& [path, session] : sessions) {
      if (session.done) continue;
      work += session.collector->drain();
      if (session.mapping->finished() || !session.mapping->writer_alive()) {
        session.collector->finish();
        session.done = true;
        if (!options.keep_shm) ::unlink(path.c_str());
      } else {
        all_done = false;
      }
    }
    if (child_running && waitpid(child, &status, WNOHANG) == child) child_running = false;
    if (!child_running && all_done) break;
    const auto now = std::chrono::steady_clock::now();
    if (progress && now - last_progress > std::chrono::milliseconds(250)) {
      last_progress = now;
      const auto sum = totals();
      fmt::print(stderr, "\rchronicle: recording: {} events, {}, {} discarded   ", human_count(sum.events),
                 human_bytes(sum.bytes), human_count(sum.discarded));
    }
    // Sleep rather than spin when there was nothing to copy, backing off up to 10 ms.
    if (work == 0) {
      // On the first live session's futex: its writers wake us when a ring passes half full.
      TrackedSession* first_live = nullptr;
      for (auto& [path, session] : sessions)
        if (!session.done && !first_live) first_live = &session;
      if (first_live)
        first_live->collector->wait_for_work(idle_sleep);
      else
        std::this_thread::sleep_for(idle_sleep);
      idle_sleep = std::min(idle_sleep * 2, std::chrono::microseconds(10'000));
    } else {
      idle_sleep = std::chrono::microseconds(500);
    }
  }
  if (progress) fmt::print(stderr, "\r\033[K");
  fs::remove_all(shm_dir, error);

  const auto sum = totals();
  fmt::print(stderr, "chronicle: {}\n", describe_status(program, status));
  if (sessions.empty()) {
    remove_output_if_empty();
    fmt::print(stderr, "chronicle: no trace: {} made no session (is it linked with chronicle?)\n", program);
  } else {
    fmt::print(stderr, "chronicle: trace in {}: {} events, {}, {} discarded, {} process{}\n", options.output,
               human_count(sum.events), human_bytes(sum.bytes), human_count(sum.discarded), sessions.size(),
               sessions.size() == 1 ? "" : "es");
    if (const std::string losses = format::describe_losses(sum.losses()); !losses.empty())
      fmt::print(stderr, "chronicle: lost: {}\n", losses);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

}  // namespace

Command add_record(CLI::App& app) {
  auto options = std::make_shared<RecordOptions>();
  CLI::App* command = app.add_subcommand("record", "Run a program with tracing on and write its trace");
  command->add_option("-o,--output", options->output, "Trace directory (default: chronicle-PROGRAM-TIME)");
  command->add_option("--mode", options->mode, "stream (drop and count when behind) or flight (keep the latest)")
      ->check(CLI::IsMember({"stream", "flight"}));
  command->add_option("--buffer-size", options->buffer_size, "Ring size per thread, e.g. 4M");
  command->add_option("--categories", options->categories, "Comma-separated categories to record, or *");
  command->add_flag("--keep-shm", options->keep_shm, "Leave the shared mappings in /dev/shm");
  command->add_flag("-q,--quiet", options->quiet, "No progress line");
  command->add_option("command", options->command, "The program and its arguments (after --)")->required();
  command->positionals_at_end();
  return {command, [options] { return run_record(*options); }};
}

}  // namespace chronicle::cli
