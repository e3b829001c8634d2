// `chronicle view DIR`: indexes a trace once and serves the viewer and the trace's windows over
// HTTP on a loopback address; `--html FILE` writes one self-contained page instead. A directory
// of several traces (a multi-process `record` run, what `chronicle merge` wrote) is shown as
// one timeline, a group of lanes per process.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "cli/common.hpp"
#include "format/output_file.hpp"
#include "viewer/assets.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/timeline_index.hpp"
#include "viewer/viewer_server.hpp"

namespace chronicle::cli {
namespace {

// A self-contained page holds the whole trace as JSON in the browser's memory: fine for a trace
// to share, not for one that needs the server's level of detail. Each task's facts are in it
// (about 150 bytes each); its details and critical path are worked out in the page when asked.
constexpr uint64_t kMaxEventsForHtml = 2'000'000;
constexpr uint64_t kMaxTasksForHtml = 50'000;

struct ViewOptions {
  std::string directory;
  std::string address = "127.0.0.1";
  uint16_t port = 0;
  std::string html;
  bool no_cache = false;
};

// On a terminal, a line that says how far indexing has got (a large trace takes minutes), at
// most a few times a second; it is cleared when the work is done. Warnings, on any output.
viewer::OpenProgress open_progress_line() {
  viewer::OpenProgress progress;
  progress.warning = [](const std::string& warning) { fmt::print(stderr, "chronicle: warning: {}\n", warning); };
  if (!isatty(STDERR_FILENO)) return progress;
  auto last_shown = std::make_shared<std::chrono::steady_clock::time_point>();
  progress.indexing = [last_shown](uint64_t events) {
    const auto now = std::chrono::steady_clock::now();
    if (now - *last_shown < std::chrono::milliseconds(250)) return;
    *last_shown = now;
    fmt::print(stderr, "\rchronicle: indexing: {} events read\033[K", human_count(events));
  };
  progress.writing = [] { fmt::print(stderr, "\rchronicle: writing the index beside the trace\033[K"); };
  return progress;
}

void report_indexing(const viewer::OpenedIndex& opened, double seconds) {
  const viewer::TimelineIndex& index = opened.index;
  if (opened.spill.refused > 0)
    fmt::print(stderr, "chronicle: warning: {} of the index's arrays were held in memory, not in {} ({})\n",
               human_count(opened.spill.refused), opened.spill_directory, opened.spill.last_problem);
  std::string details;
  if (!opened.cache_path.empty())
    details = fmt::format("kept in {} ({}): indexing {:.2f} s, writing {:.2f} s", opened.cache_path,
                          human_bytes(opened.cache_bytes), opened.build_seconds, opened.write_seconds);
  else if (!opened.keep_path.empty())
    details = fmt::format("being kept in {} while it is served", opened.keep_path);
  if (!opened.spill_directory.empty())
    details += fmt::format("{}arrays of {} or more held in files in {} while indexing: up to {}",
                           details.empty() ? "" : "; ", human_bytes(viewer::SpillScope::kDefaultThreshold),
                           opened.spill_directory, human_bytes(opened.spill.bytes_peak));
  fmt::print(stderr, "chronicle: indexed {} events, {} tasks in {:.2f} s{}\n", human_count(index.event_count()),
             human_count(index.task_lines().size()), seconds, details.empty() ? "" : " (" + details + ")");
}

// Writes the built index beside the trace on a thread of its own while the server answers from
// it, then has the server answer from the file mapped back (the built one's memory is let go),
// says so, and tells `waiter` (SIGUSR1). Destroying it waits for the writing, or stops it when
// `stop` is set (nothing kept then, no file left).
class IndexKeeper {
 public:
  IndexKeeper(viewer::ViewerServer& server, const viewer::OpenedIndex& opened, const std::atomic<bool>& stop,
              pthread_t waiter)
      : thread_([&server, &opened, &stop, waiter, built = server.index()] {
          viewer::KeptIndex kept = viewer::keep_index(*built, opened.keep_path, opened.keep_identity, &stop);
          if (!kept.problem.empty()) {
            fmt::print(stderr, "chronicle: warning: {}\n", kept.problem);
          } else if (!kept.index) {
            fmt::print(stderr, "chronicle: stopped before the index was kept: the next view indexes again\n");
          } else {
            server.replace_index(std::make_shared<const viewer::TimelineIndex>(std::move(*kept.index)));
            fmt::print(stderr, "chronicle: kept the index in {} ({}) in {:.2f} s\n", opened.keep_path,
                       human_bytes(kept.bytes), kept.seconds);
          }
          pthread_kill(waiter, SIGUSR1);
        }) {}
  ~IndexKeeper() { thread_.join(); }
  IndexKeeper(const IndexKeeper&) = delete;
  IndexKeeper& operator=(const IndexKeeper&) = delete;

 private:
  std::thread thread_;
};

int run_view(const ViewOptions& options) {
  warn_if_cut(options.directory);
  const auto started = std::chrono::steady_clock::now();
  // What the building used is let go after it: a trace's index is served from its mapped cache.
  // A server serves the index it built at once, and keeps it beside the trace meanwhile.
  viewer::OpenedIndex opened = [&] {
    const viewer::IndexingMemory indexing;
    return viewer::open_index(options.directory, !options.no_cache, open_progress_line(), options.html.empty());
  }();
  const viewer::TimelineIndex& index = opened.index;  // until the server takes it
  const std::string title = index.title();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (isatty(STDERR_FILENO)) fmt::print(stderr, "\r\033[K");
  if (!opened.cache_problem.empty()) fmt::print(stderr, "chronicle: warning: {}\n", opened.cache_problem);
  if (opened.from_cache)
    fmt::print(stderr, "chronicle: read the index of {} events, {} tasks from {} ({}) in {:.2f} s\n",
               human_count(index.event_count()), human_count(index.task_lines().size()), opened.cache_path,
               human_bytes(opened.cache_bytes), seconds);
  else
    report_indexing(opened, seconds);

  if (!options.html.empty()) {
    if (index.event_count() > kMaxEventsForHtml || index.task_lines().size() > kMaxTasksForHtml)
      throw std::invalid_argument(fmt::format(
          "{} events and {} tasks are too many for one page (at most {} and {}): use chronicle view without --html",
          human_count(index.event_count()), human_count(index.task_lines().size()), human_count(kMaxEventsForHtml),
          human_count(kMaxTasksForHtml)));
    const std::string html = viewer::standalone_html(index, title);
    // A page already there is replaced (as before), never written through: a link there is
    // replaced by the new file, its target untouched.
    format::write_output(options.html, html, format::WhenExists::replace);
    fmt::print(stderr, "chronicle: wrote {} ({})\n", options.html, human_bytes(html.size()));
    return 0;
  }

  // Blocked before the server's threads start, so that they inherit the mask and only sigwait
  // below sees these signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGUSR1);  // from the keeper: the index is kept
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  viewer::keep_memory_between_answers();
  viewer::ViewerServer server(std::make_shared<const viewer::TimelineIndex>(std::move(opened.index)), title,
                              options.address, options.port);
  if (viewer::embedded_assets().empty())
    fmt::print(stderr,
               "chronicle: this build has no viewer page (CHRONICLE_BUILD_VIEWER=OFF); only the JSON API answers\n");
  const bool ipv6 = options.address.find(':') != std::string::npos;
  fmt::print("chronicle: viewing {} at http://{}{}{}:{}/\n", options.directory, ipv6 ? "[" : "", options.address,
             ipv6 ? "]" : "", server.port());
  std::fflush(stdout);
  std::atomic<bool> stop_keeping{false};
  std::optional<IndexKeeper> keeper;
  if (!opened.keep_path.empty()) keeper.emplace(server, opened, stop_keeping, pthread_self());
  int signal = 0;
  while (sigwait(&stop_signals, &signal) == 0 && signal == SIGUSR1) keeper.reset();
  if (keeper) {
    // Stopped while the index is written: it is finished first, unless stopped again.
    fmt::print(stderr, "chronicle: finishing the index in {} first (stop again to keep none)\n", opened.keep_path);
    if (sigwait(&stop_signals, &signal) == 0 && signal != SIGUSR1) stop_keeping = true;
  }
  return 0;
}

}  // namespace

Command add_view(CLI::App& app) {
  auto options = std::make_shared<ViewOptions>();
  CLI::App* view =
      app.add_subcommand("view", "Serve a trace to the viewer in a browser (or write it as one HTML file)");
  view->add_option("DIR", options->directory, "Trace directory")->required();
  view->add_option("--port", options->port, "Port to listen on (0: a free one, printed)");
  view->add_option("--address", options->address, "Address to listen on")->capture_default_str();
  view->add_option("--html", options->html, "Write one self-contained HTML file (small traces) instead of serving");
  view->add_flag("--no-cache", options->no_cache,
                 "Index the trace again, and keep no index (by default the index is written the first time, to "
                 "DIR/.chronicle-view-index when DIR is yours alone, else to $XDG_CACHE_HOME/chronicle, and read "
                 "from there afterwards)");
  return {view, [options] { return run_view(*options); }};
}

}  // namespace chronicle::cli
