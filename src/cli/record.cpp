// `chronicle record -- PROGRAM ARGS...`: runs a program with tracing on and drains its rings
// (and those of the processes it starts) into a trace directory while it runs.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include "chronicle/config.hpp"
#include "cli/common.hpp"
#include "cli/keeping_up.hpp"
#include "cli/otlp_push_cli.hpp"
#include "cli/record_trigger.hpp"
#include "collector/collector.hpp"
#include "export/otlp_live.hpp"
#include "export/otlp_push.hpp"
#include "settings/settings.hpp"

extern char** environ;

namespace chronicle::cli {
namespace {

struct RecordOptions {
  std::string output;
  std::string mode = "stream";
  std::string buffer_size = "4M";
  std::string categories = "*";
  bool keep_shm = false;
  bool allow_shared_output = false;
  bool quiet = false;
  std::vector<std::string> command;
  OtlpPushCliOptions otlp;  // --otlp-endpoint: the spans pushed while the program runs, the rest at its end
  double otlp_interval_seconds = 1;
  int attach = 0;                      // --attach PID: collect a running program's session instead
  TriggerOptions trigger;              // --trigger: flight-recorder snapshots when a metric crosses a line
  unsigned sample_frequency = 0;       // --sample[=FREQ]
  bool context_switches = false;       // --sched
  bool compress = false;               // --compress
  std::string rotate;                  // --rotate SIZE|DURATION
  std::string max_size;                // --max-size SIZE
  collector::CollectorOptions layout;  // from the three above
};

// --rotate's value: a size as --buffer-size takes ("64M"), or a duration: "500ms", "30s", "10min",
// "2h".
void parse_rotation(const std::string& text, collector::CollectorOptions& layout) {
  struct Unit {
    std::string_view suffix;
    int64_t milliseconds;
  };
  static constexpr Unit kUnits[] = {{"ms", 1}, {"min", 60'000}, {"s", 1000}, {"h", 3'600'000}};
  for (const Unit& unit : kUnits) {
    if (!text.ends_with(unit.suffix)) continue;
    const std::string number = text.substr(0, text.size() - unit.suffix.size());
    int64_t count = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), count);
    if (number.empty() || error != std::errc() || end != number.data() + number.size() || count <= 0 ||
        count > INT64_MAX / unit.milliseconds / 1'000'000)
      throw std::invalid_argument(
          fmt::format("--rotate {}: expected a size (64M) or a duration (30s, 10min, 1h)", text));
    layout.rotate_every = std::chrono::milliseconds(count * unit.milliseconds);
    return;
  }
  try {
    layout.rotate_bytes = recorder::parse_size(text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(fmt::format("--rotate {}: expected a size (64M) or a duration (30s, 10min, 1h)", text));
  }
  if (layout.rotate_bytes == 0) throw std::invalid_argument("--rotate 0: a chunk needs some bytes");
}

struct TrackedSession {
  std::unique_ptr<collector::SessionMapping> mapping;
  std::unique_ptr<collector::Collector> collector;
  bool done = false;
  bool told_no_memory = false;
};

// Once per session, as soon as a ring of it found no memory (the program says nothing of it
// under record: CHRONICLE_COLLECTOR=external).
void tell_if_no_memory(const std::string& shm_dir, TrackedSession& session) {
  const format::ShmHeader& header = session.mapping->header();
  if (session.told_no_memory || header.channels_without_memory.load(std::memory_order_relaxed) == 0) return;
  session.told_no_memory = true;
  tell("{}chronicle: warning: pid {}: {}\n", stderr_is_terminal() ? "\r\033[K" : "", header.pid,
       recorder::no_memory_for_rings(shm_dir, session.mapping->geometry().ring_bytes));
}

volatile sig_atomic_t g_forward_signal = 0;
// A signal ends the OTLP push too: the attempt in flight stops, what is left goes to the spool.
std::atomic<bool> g_push_cancelled{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
void remember_signal(int signal) {
  g_forward_signal = signal;
  g_push_cancelled.store(true, std::memory_order_relaxed);
}

std::string describe_status(const std::string& program, int status) {
  if (WIFEXITED(status)) return fmt::format("{} exited with status {}", program, WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("{} was killed by signal {} ({})", program, WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("{} ended (status 0x{:x})", program, status);
}

// What the program's recorder would refuse, refused before the program runs untraced.
void check_settings(RecordOptions& options) {
  if (options.mode != "stream" && options.mode != "flight")
    throw std::invalid_argument(fmt::format("--mode {}: expected stream or flight", options.mode));
  if (!options.trigger.conditions.empty() && options.mode != "flight")
    throw std::invalid_argument(
        "--trigger snapshots a flight recorder's rings when it fires: add --mode flight (in stream mode the whole "
        "run is in the trace anyway)");
  if (!options.rotate.empty()) {
    if (options.mode == "flight")
      throw std::invalid_argument("--rotate cuts a stream-mode trace into chunks: a flight recorder is written once");
    parse_rotation(options.rotate, options.layout);
  }
  if (!options.max_size.empty()) {
    if (options.rotate.empty())
      throw std::invalid_argument(
          "--max-size removes the oldest chunks of a rotated trace: add --rotate SIZE|DURATION to cut it into chunks");
    options.layout.max_size = recorder::parse_size(options.max_size);
  }
  options.layout.compress = options.compress;
  options.layout.counts_process_cpu = true;  // every thread of record is the tracing's cost
  const size_t buffer_size = recorder::parse_size(options.buffer_size);
  size_t packet_size = Config{}.packet_size;
  if (const char* text = std::getenv(recorder::kEnvPacketSize); text && *text) packet_size = recorder::parse_size(text);
  if (const std::string problem = recorder::ring_geometry_problem(buffer_size, packet_size); !problem.empty())
    throw std::invalid_argument(fmt::format("--buffer-size {}: {}", options.buffer_size, problem));
}

// Waits for no process: the direct child's status (when it ended) and whether any other process
// is left. As the child subreaper, record is the parent of every process its program started and
// left behind: the trace is whole only once they are gone too.
struct Children {
  pid_t child = 0;
  bool child_running = true;
  bool others_running = true;
  int status = 0;
  void poll() {
    while (true) {
      int reaped_status = 0;
      const pid_t reaped = waitpid(-1, &reaped_status, WNOHANG);
      if (reaped == child) {
        status = reaped_status;
        child_running = false;
      }
      if (reaped > 0) continue;
      others_running = reaped == 0 && !child_running;
      if (reaped < 0) child_running = false;  // ECHILD: nobody is left
      return;
    }
  }
};

collector::CollectorStats totals(const std::map<std::string, TrackedSession>& sessions) {
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
    sum.discards_unwritten += stats.discards_unwritten;
    sum.events_no_channel += stats.events_no_channel;
    sum.definitions_dropped += stats.definitions_dropped;
    sum.chunks += stats.chunks;
    sum.chunks_removed += stats.chunks_removed;
    sum.chunk_begin_failures += stats.chunk_begin_failures;
    if (!stats.chunk_begin_failure.empty()) sum.chunk_begin_failure = stats.chunk_begin_failure;
    sum.files_unwritten.insert(sum.files_unwritten.end(), stats.files_unwritten.begin(), stats.files_unwritten.end());
  }
  return sum;
}

// Starts collecting the sessions that appeared in `shm_dir` (a program starting, or one of its
// children). A mapping its writer has not initialised yet is tried again next round; a trace
// that cannot be written is a failure, remembered in `failures`.
void find_new_sessions(const std::string& shm_dir, const RecordOptions& options,
                       std::map<std::string, TrackedSession>& sessions, std::vector<std::string>& failures) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(shm_dir, error)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".shm" || sessions.count(path)) continue;
    std::unique_ptr<collector::SessionMapping> mapping;
    try {
      mapping = std::make_unique<collector::SessionMapping>(path);
    } catch (const std::exception&) {
      continue;  // the magic is written last
    }
    const auto& header = mapping->header();
    std::string directory = options.output;
    if (!sessions.empty())
      directory = fmt::format("{}/{}-{}", options.output,
                              std::string(header.process_name, strnlen(header.process_name, 64)), header.pid);
    TrackedSession tracked;
    uint32_t holder = 0;
    if (!collector::claim_session(*mapping, holder)) {
      failures.push_back(fmt::format("process {}: its session is already collected by process {}", header.pid, holder));
      tracked.done = true;
      tracked.mapping = std::move(mapping);
      sessions.emplace(path, std::move(tracked));
      continue;
    }
    try {
      tracked.collector = std::make_unique<collector::Collector>(*mapping, directory, options.layout);
    } catch (const std::exception& failure) {
      failures.push_back(fmt::format("process {}: {}", header.pid, failure.what()));
      tracked.done = true;
    }
    tracked.mapping = std::move(mapping);
    sessions.emplace(path, std::move(tracked));
  }
}

// One round over the sessions: copies what they have, finishes those whose writers are gone.
// Returns the bytes copied; `all_done` tells whether every session is finished.
size_t collect_round(std::map<std::string, TrackedSession>& sessions, const RecordOptions& options,
                     std::vector<std::string>& failures, bool& all_done, exports::OtlpLivePush* live = nullptr) {
  size_t work = 0;
  all_done = true;
  for (auto& [path, session] : sessions) {
    if (session.done) continue;
    try {
      work += session.collector->drain();
      if (live)
        live->publish(session.collector->output_dir(), session.collector->complete_below(),
                      {session.collector->committed_sizes(), session.collector->writing_chunk()});
      if (session.mapping->finished() || !session.mapping->writer_alive()) {
        session.collector->finish();
        session.done = true;
        if (!options.keep_shm) ::unlink(path.c_str());
      } else {
        all_done = false;
      }
      tell_if_no_memory(std::filesystem::path(path).parent_path().string(), session);
    } catch (const std::exception& failure) {
      failures.push_back(fmt::format("{}: {}", session.collector->output_dir(), failure.what()));
      session.done = true;
    }
  }
  return work;
}

void print_summary(const RecordOptions& options, const std::string& program, const Children& children,
                   const std::map<std::string, TrackedSession>& sessions, const std::vector<std::string>& failures,
                   size_t writers_left, const std::string& fell_behind) {
  const auto sum = totals(sessions);
  tell("chronicle: {}\n", describe_status(program, children.status));
  if (sessions.empty()) {
    tell("chronicle: no trace: {} made no session (is it linked with chronicle?)\n", program);
  } else {
    tell("chronicle: trace in {}: {} events, {}, {} discarded, {} process{}\n", options.output, human_count(sum.events),
         human_bytes(sum.bytes), human_count(sum.discarded), sessions.size(), sessions.size() == 1 ? "" : "es");
    if (const std::string losses = format::describe_losses(sum.losses()); !losses.empty())
      tell("chronicle: lost: {}\n", losses);
    if (!fell_behind.empty()) tell("chronicle: record fell behind the program; at the worst, {}\n", fell_behind);
    if (sum.chunks > 0)
      tell("chronicle: {} chunk{}{}\n", sum.chunks, sum.chunks == 1 ? "" : "s",
           sum.chunks_removed == 0 ? std::string()
                                   : fmt::format(", the oldest {} removed to stay under --max-size {}",
                                                 sum.chunks_removed, options.max_size));
    if (sum.chunk_begin_failures > 0)
      tell(
          "chronicle: warning: a chunk could not begin: tried {} time{}, the last: {}; the chunk being written went "
          "on past --rotate {} (nothing lost by it)\n",
          sum.chunk_begin_failures, sum.chunk_begin_failures == 1 ? "" : "s", sum.chunk_begin_failure, options.rotate);
  }
  for (const std::string& file : sum.files_unwritten)
    tell("chronicle: lost: {} (the trace keeps its earlier version, or none)\n", file);
  for (const std::string& failure : failures) tell("chronicle: error: {}\n", failure);
  if (children.others_running) tell("chronicle: stopped waiting for the processes {} left running\n", program);
  if (writers_left > 0)
    tell(
        "chronicle: {} process{} of the program still running: their trace{} as far as collected, their events "
        "from now on are not recorded\n",
        writers_left, writers_left == 1 ? " was" : "es were", writers_left == 1 ? " is" : "s are");
  if (options.keep_shm && !sessions.empty())
    tell("chronicle: shared mappings kept in {}\n",
         std::filesystem::path(sessions.begin()->first).parent_path().string());
}

// The events written that the live push never read: those --max-size removed before a round
// came to them (the trace's summary counts the chunks removed), or, without it, those the reading
// skipped or stopped before (its warnings and errors say why). Their spans were not sent.
void report_what_the_push_missed(uint64_t events_read, const collector::CollectorStats& written) {
  if (events_read >= written.events) return;
  const uint64_t missed = written.events - events_read;
  if (written.chunks_removed > 0)
    tell(
        "chronicle: the push read {} of {} events: --max-size removed the other {} before it read them (their "
        "spans were not sent)\n",
        events_read, written.events, missed);
  else
    tell("chronicle: the push read {} of {} events: the other {} were not read (their spans were not sent)\n",
         events_read, written.events, missed);
}

// What a run has found and collected so far.
struct Recording {
  std::map<std::string, TrackedSession> sessions;
  std::vector<std::string> failures;
  Children children;
  size_t writers_left = 0;  // sessions still written to when record stopped waiting
  std::string fell_behind;  // KeepingUp::worst(): "" when record kept up
};

// Runs the program with the environment that sends its sessions' mappings to `shm_dir`.
void spawn_program(RecordOptions& options, const std::string& shm_dir, Recording& run) {
  setenv(recorder::kEnvOutput, options.output.c_str(), 1);
  setenv(recorder::kEnvCollector, "external", 1);
  setenv(recorder::kEnvShmDir, shm_dir.c_str(), 1);
  setenv(recorder::kEnvMode, options.mode.c_str(), 1);
  setenv(recorder::kEnvBufferSize, options.buffer_size.c_str(), 1);
  setenv(recorder::kEnvCategories, options.categories.c_str(), 1);
  if (options.sample_frequency > 0) setenv(recorder::kEnvSample, std::to_string(options.sample_frequency).c_str(), 1);
  if (options.context_switches) setenv(recorder::kEnvSched, "1", 1);
  // Processes the program leaves behind (`prog &` in a shell that exits) become our children:
  // we wait for them and collect their sessions too.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::vector<char*> argv;
  for (auto& word : options.command) argv.push_back(word.data());
  argv.push_back(nullptr);
  if (int failed = posix_spawnp(&run.children.child, argv[0], nullptr, nullptr, argv.data(), environ); failed != 0)
    throw std::runtime_error(fmt::format("cannot run {}: {}", options.command.front(), std::strerror(failed)));
  // Ctrl-C reaches the program too (same process group); we stay to collect what it leaves.
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A closed stderr must not kill us before the trace is finished and /dev/shm cleaned. The
  // program was spawned with the disposition we were given.
  ignore_broken_pipes();
}

// The program ended and a signal asks us to stop: what its leftover processes wrote so far.
void stop_waiting(const RecordOptions& options, Recording& run) {
  bool all_done = true;
  collect_round(run.sessions, options, run.failures, all_done);
  for (auto& [path, session] : run.sessions) {
    if (session.done) continue;
    ++run.writers_left;
    try {
      session.collector->finish();
    } catch (const std::exception& failure) {
      run.failures.push_back(fmt::format("{}: {}", session.collector->output_dir(), failure.what()));
    }
    session.done = true;
  }
}

// Collects until the program, every process it left behind and every session have ended.
// The sessions still being written, for the trigger watcher.
std::map<std::string, const collector::SessionMapping*> live_mappings(const Recording& run) {
  std::map<std::string, const collector::SessionMapping*> out;
  for (const auto& [path, session] : run.sessions)
    if (session.mapping && session.collector) out.emplace(path, session.mapping.get());
  return out;
}

void collect_until_done(const RecordOptions& options, const std::string& shm_dir, Recording& run,
                        exports::OtlpLivePush* live, TriggerWatcher* triggers) {
  const bool progress = stderr_is_terminal() && !options.quiet;
  auto last_progress = std::chrono::steady_clock::now();
  KeepingUp keeping_up(options.compress);
  auto idle_sleep = std::chrono::microseconds(500);
  while (true) {
    const int signal = g_forward_signal;
    if (signal == SIGTERM && run.children.child_running) {
      kill(run.children.child, SIGTERM);
      g_forward_signal = 0;
    }
    find_new_sessions(shm_dir, options, run.sessions, run.failures);
    if (triggers) triggers->poll(live_mappings(run));
    bool all_done = true;
    const size_t work = collect_round(run.sessions, options, run.failures, all_done, live);
    run.children.poll();
    if (!run.children.child_running && !run.children.others_running && all_done) {
      // A process may have made its session, written and ended since the listing above: with
      // every process gone, one more listing finds all there will be.
      const size_t known = run.sessions.size();
      find_new_sessions(shm_dir, options, run.sessions, run.failures);
      if (run.sessions.size() == known) break;
      continue;
    }
    if (!run.children.child_running && signal != 0) {
      stop_waiting(options, run);
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_progress > std::chrono::milliseconds(250)) {
      last_progress = now;
      const auto sum = totals(run.sessions);
      const std::string behind = keeping_up.update(sum.discarded);
      if (progress)
        tell("\r\033[Kchronicle: recording: {} events, {}, {} discarded{}{}   ", human_count(sum.events),
             human_bytes(sum.bytes), human_count(sum.discarded), behind.empty() ? "" : "; ", behind);
    }
    // Sleep rather than spin when there was nothing to copy, backing off up to 10 ms; after a
    // drain that found work, sleep the whole 10 ms: a busy program is drained in batches, and its
    // writers wake us when a ring passes a quarter full (ring_protocol.md, step 13). On a machine
    // the program keeps busy, each wake-up of this process takes a core from the program.
    constexpr std::chrono::microseconds kLongestSleep(10'000);
    // On the first live session's futex.
    TrackedSession* first_live = nullptr;
    for (auto& [path, session] : run.sessions)
      if (!session.done && !first_live) first_live = &session;
    const auto sleep = work == 0 ? idle_sleep : kLongestSleep;
    if (first_live)
      first_live->collector->wait_for_work(sleep);
    else
      std::this_thread::sleep_for(sleep);
    idle_sleep = work == 0 ? std::min(idle_sleep * 2, kLongestSleep) : std::chrono::microseconds(500);
  }
  if (progress) tell("\r\033[K");
  keeping_up.update(totals(run.sessions).discarded);  // what the last interval lost
  run.fell_behind = keeping_up.worst();
  if (triggers) triggers->finish(live_mappings(run));
}

// The directory the programs put their mappings in, made new by this process (mode 0700):
// /dev/shm/chronicle-record-PID, or, when something already has that name (left by an earlier
// process of this pid, or put there by another user), a name of that prefix no one can choose in
// advance. What this process did not make is never removed, nor used.
std::string make_mapping_directory() {
  std::string directory = fmt::format("/dev/shm/chronicle-record-{}", getpid());
  if (::mkdir(directory.c_str(), 0700) == 0) return directory;
  if (errno == EEXIST) {
    directory += "-XXXXXX";
    if (::mkdtemp(directory.data())) return directory;
  }
  throw std::runtime_error(fmt::format("cannot create {}: {}", directory, std::strerror(errno)));
}

int run_record(RecordOptions& options) {
  namespace fs = std::filesystem;
  check_settings(options);
  // The compressor's memory is touched now, not while the program's first ring fills: on a VM
  // that took 20 ms, and cost the first milliseconds of a fast writer's events.
  if (options.layout.compress) options.layout.unit_writer = collector::warmed_unit_writer(Config{}.packet_size, 2);
  // The exporter's environment, and a bad endpoint, are said before the program runs, not after.
  resolve_otlp_environment(options.otlp);
  if (!options.otlp.endpoint.empty())
    exports::otlp_traces_url(options.otlp.endpoint, options.otlp.endpoint_is_traces_url);
  // The live push reads what the files hold: a quiet thread's open packet is cut once its events
  // have waited a push interval, or they (and every later event) would wait until it fills.
  if (!options.otlp.endpoint.empty())
    options.layout.cut_open_packets_after =
        std::chrono::milliseconds(static_cast<int64_t>(options.otlp_interval_seconds * 1000));
  const std::string program = options.command.front();
  if (options.output.empty())
    options.output = fmt::format("chronicle-{}-{}", fs::path(program).filename().string(), timestamp_for_path());
  const bool output_existed = prepare_output_directory(options.output, options.allow_shared_output);
  // A run that wrote nothing leaves no empty directory to trip over (the next record into it,
  // a script looking for traces). Only the directory itself: parents made above stay.
  auto remove_output_if_empty = [&options, output_existed] {
    std::error_code ignored;
    if (!output_existed && fs::is_empty(options.output, ignored)) fs::remove(options.output, ignored);
  };

  // The programs put their mappings here; we find them by listing it. It goes whatever happens,
  // unless --keep-shm.
  std::string shm_dir;
  try {
    shm_dir = make_mapping_directory();
  } catch (...) {
    remove_output_if_empty();
    throw;
  }
  bool keep_shm_dir = false;
  struct ShmDirGuard {
    const std::string& path;
    const bool& keep;
    ~ShmDirGuard() {
      std::error_code ignored;
      if (!keep) std::filesystem::remove_all(path, ignored);
    }
  } shm_dir_guard{shm_dir, keep_shm_dir};

  // The pusher thread reads what the collectors have written, never the rings.
  std::unique_ptr<exports::OtlpLivePush> live;
  if (!options.otlp.endpoint.empty()) {
    exports::OtlpPushOptions push = otlp_push_options(options.output, options.otlp);
    push.cancel = &g_push_cancelled;
    live = std::make_unique<exports::OtlpLivePush>(
        push, std::chrono::milliseconds(static_cast<int64_t>(options.otlp_interval_seconds * 1000)));
  }
  std::unique_ptr<TriggerWatcher> triggers;
  if (!options.trigger.conditions.empty()) triggers = std::make_unique<TriggerWatcher>(options.trigger, options.output);
  Recording run;
  try {
    spawn_program(options, shm_dir, run);
  } catch (...) {
    remove_output_if_empty();
    throw;
  }
  collect_until_done(options, shm_dir, run, live.get(), triggers.get());
  keep_shm_dir = options.keep_shm && !run.sessions.empty();
  if (run.sessions.empty()) remove_output_if_empty();
  print_summary(options, program, run.children, run.sessions, run.failures, run.writers_left, run.fell_behind);
  int exit_code = kExitFailure;
  if (!run.failures.empty())
    exit_code = kExitFailure;
  else if (WIFEXITED(run.children.status))
    exit_code = WEXITSTATUS(run.children.status);
  else if (WIFSIGNALED(run.children.status))
    exit_code = 128 + WTERMSIG(run.children.status);
  // A push that did not deliver everything fails a run that otherwise succeeded; the program's
  // own failure stays what the exit code says.
  if (live && !run.sessions.empty()) {
    const int pushed = finish_live_otlp_push(*live, options.output, options.otlp);
    if (pushed != 0 && exit_code == 0) exit_code = pushed;
    report_what_the_push_missed(live->events_read(), totals(run.sessions));
    if (const uint64_t late = live->late_events(); late > 0)
      tell(
          "chronicle: warning: the push read {} event{} after it had sent later ones (a thread stopped inside a trace "
          "point for longer than --otlp-interval): their spans went late, and one paired across threads with them may "
          "be missing; the trace has them in order (chronicle export --otlp-endpoint sends it exactly)\n",
          late, late == 1 ? "" : "s");
  }
  return exit_code;
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
  command->add_flag("--keep-shm", options->keep_shm, "Leave the shared mappings in /dev/shm (the summary says where)");
  command->add_flag("--allow-shared-output", options->allow_shared_output,
                    "Write into a directory other users may write to (they could replace the trace's files)");
  command->add_flag("-q,--quiet", options->quiet, "No progress line");
  command->add_flag("--compress", options->compress,
                    "Write the trace compressed with zstd (.ctfz files: every chronicle tool reads them, "
                    "`chronicle convert` gives plain CTF)");
  command->add_option("--rotate", options->rotate,
                      "Cut the trace into chunks (chunk-000001...) of this size (64M) or duration (30s, 10min, 1h), "
                      "each a whole trace");
  command->add_option("--max-size", options->max_size,
                      "With --rotate: remove the oldest chunks while the trace is larger than this (e.g. 1G)");
  command
      ->add_option("--sample", options->sample_frequency,
                   "Call-stack samples per second of each thread's CPU time (--sample alone: 999); "
                   "see docs/profiling.md")
      ->expected(0, 1)
      ->default_str("999")
      ->check(CLI::Range(1u, recorder::kMaxSampleFrequency));
  command->add_flag("--sched", options->context_switches,
                    "Record context switches: when each thread left and regained a CPU, and why");
  add_otlp_push_options(*command, options->otlp, false);
  command
      ->add_option("--otlp-interval", options->otlp_interval_seconds,
                   "Seconds between pushes of the spans that have ended while the program runs (default 1)")
      ->check(CLI::Range(0.01, 3600.0));
  command
      ->add_option("--trigger", options->trigger.conditions,
                   "With --mode flight: snapshot the program's rings each time a metric condition becomes true, "
                   "e.g. 'rpc.latency_seconds:p99 > 0.05' or 'errors rate > 10/s' (repeatable)")
      ->allow_extra_args(false);
  command->add_option("--trigger-after", options->trigger.after,
                      "How long after the crossing the snapshot is taken (default 1s)");
  command->add_option("--trigger-window", options->trigger.window,
                      "What a trigger's rates and quantiles cover (default 1s)");
  command->add_option("--trigger-hysteresis", options->trigger.hysteresis,
                      "Fraction of the threshold the value must come back by before a trigger fires again (0.1)");
  command->add_option("--trigger-limit", options->trigger.limit, "Snapshots at most (default 10)");
  auto* program = command->add_option("command", options->command, "The program and its arguments (after --)");
  auto* attach =
      command->add_option("--attach", options->attach,
                          "Collect the session of running process PID (e.g. started with CHRONICLE_ARMED=1) instead, "
                          "until it ends or Ctrl-C");
  attach->excludes(program);
  command->positionals_at_end();
  command->parse_complete_callback([options] {
    if (options->attach == 0 && options->command.empty()) throw CLI::RequiredError("command (or --attach PID)");
  });
  return {command, [options] {
            if (options->attach != 0) {
              check_settings(*options);
              return run_record_attach(options->attach, options->output, options->allow_shared_output, options->layout);
            }
            return run_record(*options);
          }};
}

}  // namespace chronicle::cli
