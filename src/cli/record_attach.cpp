// `chronicle record --attach PID`: collects the session of a program that is already running and
// has no collector (started with CHRONICLE_ARMED=1, say), until the program ends or Ctrl-C.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <memory>
#include <thread>

#include "cli/common.hpp"
#include "collector/collector.hpp"

namespace chronicle::cli {
namespace {

volatile sig_atomic_t g_stop_attach = 0;
void stop_attach(int) {
  g_stop_attach = 1;
}

// Drains until the session ends, its writer dies, or a signal asks us to stop; whether the
// program went on.
bool drain_until_done(collector::SessionMapping& mapping, collector::Collector& collector) {
  auto idle_sleep = std::chrono::microseconds(500);
  for (;;) {
    const size_t work = collector.drain();
    if (mapping.finished() || !mapping.writer_alive()) return false;
    if (g_stop_attach) return true;
    // As record's own loop: backing off when idle, batches when busy (writers wake us at a quarter).
    constexpr std::chrono::microseconds kLongestSleep(10'000);
    collector.wait_for_work(work == 0 ? idle_sleep : kLongestSleep);
    idle_sleep = work == 0 ? std::min(idle_sleep * 2, kLongestSleep) : std::chrono::microseconds(500);
  }
}

}  // namespace

int run_record_attach(int pid, std::string output, bool allow_shared_output,
                      const collector::CollectorOptions& layout) {
  const auto mapping = open_session_of(pid);
  format::ShmHeader& header = mapping->header();
  if (!mapping->writer_alive() || mapping->finished())
    throw std::runtime_error(fmt::format(
        "process {}'s session is not running: read what it left with `chronicle snapshot {}`", pid, mapping->path()));
  if (header.policy != format::BufferPolicy::stream)
    throw std::runtime_error(fmt::format(
        "process {}'s session is a flight recorder, which nothing drains: take its rings with `chronicle ctl {} "
        "snapshot`",
        pid, pid));
  uint32_t holder = 0;
  if (!collector::claim_session(*mapping, holder))
    throw std::runtime_error(fmt::format("process {}'s session is already collected by process {}{}", pid, holder,
                                         holder == static_cast<uint32_t>(pid) ? " (its own collector)" : ""));
  struct Release {
    collector::SessionMapping& mapping;
    ~Release() { collector::release_session(mapping); }
  } release{*mapping};
  if (output.empty()) output = fmt::format("chronicle-attach-{}-{}", pid, timestamp_for_path());
  prepare_output_directory(output, allow_shared_output);
  collector::Collector collector(*mapping, output, layout);
  collector.start_after_consumed();
  struct sigaction action {};
  action.sa_handler = stop_attach;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  ignore_broken_pipes();  // the session's claim is released at the end, whatever stderr is
  const auto began = std::chrono::steady_clock::now();
  const bool program_goes_on = drain_until_done(*mapping, collector);
  collector.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const auto& stats = collector.stats();
  tell("chronicle: attached to process {} ({}) for {:.1f} s: {} events, {}, {} discarded in {}; {}\n", pid,
       header.process_name, seconds, human_count(stats.events), human_bytes(stats.bytes), human_count(stats.discarded),
       output,
       program_goes_on ? "it goes on (its rings fill and count what they drop until another collector attaches)"
                       : "its session ended");
  if (const std::string losses = format::describe_losses(stats.losses()); !losses.empty())
    tell("chronicle: lost: {}\n", losses);
  return stats.files_unwritten.empty() ? 0 : kExitFailure;
}

}  // namespace chronicle::cli
