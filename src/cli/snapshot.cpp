// `chronicle snapshot PID_OR_SHM_FILE -o DIR`: what a process's rings hold now, as a trace.
// Works on a running process and on the mapping a dead one left behind.
#include <sys/stat.h>

#include <fmt/format.h>
#include <algorithm>
#include <memory>

#include "cli/common.hpp"
#include "collector/collector.hpp"
#include "shm/mapping_check.hpp"

namespace chronicle::cli {

int run_snapshot(SnapshotOptions& options) {
  const bool is_pid = !options.target.empty() && std::all_of(options.target.begin(), options.target.end(), ::isdigit);
  const auto opened = is_pid ? open_session_of(recorded_program_or_itself(std::stoi(options.target)))
                             : std::make_unique<collector::SessionMapping>(options.target);
  collector::SessionMapping& mapping = *opened;
  const std::string& path = mapping.path();
  if (options.output.empty())
    options.output = fmt::format("chronicle-snapshot-{}-{}", mapping.header().pid, timestamp_for_path());
  prepare_output_directory(options.output, options.allow_shared_output);
  collector::Collector collector(mapping, options.output);
  collector.snapshot();
  const auto& stats = collector.stats();
  fmt::print(stderr, "chronicle: snapshot of {} (pid {}, {}) in {}: {} events, {}, {} discarded\n", path,
             mapping.header().pid, mapping.writer_alive() ? "running" : "not running", options.output,
             human_count(stats.events), human_bytes(stats.bytes), human_count(stats.discarded));
  if (const std::string losses = format::describe_losses(stats.losses()); !losses.empty())
    fmt::print(stderr, "chronicle: lost: {}\n", losses);
  if (stats.packets_left_out > 0)
    fmt::print(stderr,
               "chronicle: {} older packets were left out (rewritten or damaged while copied): each thread's "
               "events are contiguous, some start later\n",
               human_count(stats.packets_left_out));
  return 0;
}

Command add_snapshot(CLI::App& app) {
  auto options = std::make_shared<SnapshotOptions>();
  CLI::App* command =
      app.add_subcommand("snapshot", "Write what a process's rings hold now (running, or dead and left behind)");
  command->add_option("target", options->target, "A process id, or the path of a chronicle .shm mapping")->required();
  command->add_option("-o,--output", options->output, "Trace directory (default: chronicle-snapshot-PID-TIME)");
  command->add_flag("--allow-shared-output", options->allow_shared_output,
                    "Write into a directory other users may write too (as record's)");
  return {command, [options] { return run_snapshot(*options); }};
}

}  // namespace chronicle::cli
