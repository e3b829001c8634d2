#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "metrics/snapshot.hpp"
#include "shm/mapping_check.hpp"

namespace chronicle::collector {
struct CollectorOptions;
}

namespace chronicle::reader {
class Trace;
}
namespace chronicle::shm {
class SessionMapping;
}
namespace chronicle::collector {
using shm::SessionMapping;
}

namespace chronicle::cli {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;  // a trace or mapping that is malformed
inline constexpr int kExitUsage = 2;     // a command line that does not parse (as other tools do)

// A subcommand: its parser, and what runs when it was chosen. Returns the process exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_record(CLI::App& app);
Command add_snapshot(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_dump(CLI::App& app);
Command add_stats(CLI::App& app);
Command add_top(CLI::App& app);
Command add_metrics(CLI::App& app);
Command add_export(CLI::App& app);
Command add_view(CLI::App& app);
Command add_merge(CLI::App& app);
Command add_ctl(CLI::App& app);
Command add_recover(CLI::App& app);

// `snapshot` (also `ctl PID snapshot`): writes what the rings of `target` (a pid, or a mapping's
// path) hold now into the trace directory `output` (default chronicle-snapshot-PID-TIME).
struct SnapshotOptions {
  std::string target;
  std::string output;
  bool allow_shared_output = false;  // as record's: prepare_output_directory
};
int run_snapshot(SnapshotOptions& options);

// `record --attach PID`: drains the running session of process `pid` into `output` (default
// chronicle-attach-PID-TIME) until it ends or SIGINT/SIGTERM.
// `layout`: --compress, --rotate, --max-size.
int run_record_attach(int pid, std::string output, bool allow_shared_output, const collector::CollectorOptions& layout);

// Whether standard error is a terminal (progress lines go there only then).
bool stderr_is_terminal();
// Writes to stderr, which may be closed under a recording (`chronicle record ... 2>&1 | head -1`):
// a message that cannot be shown must not stop it. The recording commands ignore SIGPIPE while
// they run (ignore_broken_pipes) so such a write fails instead of killing them.
template <typename... Args>
void tell(fmt::format_string<Args...> format, Args&&... args) {
  try {
    fmt::print(stderr, format, std::forward<Args>(args)...);
  } catch (const std::system_error&) {
  }
}
void ignore_broken_pipes();

std::string human_bytes(uint64_t bytes);
std::string human_count(uint64_t count);
std::string timestamp_for_path();

// The trace session mappings (chronicle-PID-N.shm) of process `pid`, newest first, wherever
// they are: in $CHRONICLE_SHM_DIR when set, in /dev/shm, and in the directories `chronicle
// record` gives the programs it runs (/dev/shm/chronicle-record-RECORDPID/). Every reader of a
// live process by pid finds its session here. `searched` (if given) names the places looked in.
std::vector<std::string> find_session_mappings(int pid, std::string* searched = nullptr);
// Those places: $CHRONICLE_SHM_DIR, /dev/shm, /dev/shm/chronicle-record-*/.
std::vector<std::string> session_mapping_places();

// `pid` itself when it has a session, or, when `pid` is a `chronicle record` (its directory
// /dev/shm/chronicle-record-PID[-*] holds its programs' mappings), the one program it records
// (said on standard error). Throws when it records several, naming them: the user picks one.
int recorded_program_or_itself(int pid);

// Opens the first of `paths` (a process's mappings, found by its pid) that `owner` owns, saying
// on standard error why each other one was refused; nullptr when none is left. A mapping that
// is malformed ends the search (format::InputError: exit code 2).
template <typename Mapping>
std::unique_ptr<Mapping> open_first_owned(const std::vector<std::string>& paths, uid_t owner) {
  for (const std::string& path : paths) {
    try {
      return std::make_unique<Mapping>(path, owner);
    } catch (const shm::MappingRefused& refusal) {
      fmt::print(stderr, "chronicle: {}\n", refusal.what());
    }
  }
  return nullptr;
}

// The newest session mapping of process `pid` that its user made (another user's file of that
// name is refused, and said so: it could have been planted); throws std::runtime_error saying
// where it looked when there is none.
std::unique_ptr<collector::SessionMapping> open_session_of(int pid);

// The metrics mapping of process `pid` (MetricsMapping::candidates_for) made by its user;
// throws std::runtime_error saying where it looked when there is none.
std::unique_ptr<metrics::MetricsMapping> open_metrics_of(int pid);

// Makes the output directory `output` of a command that writes a trace (mode 0700; it may exist
// if empty) and checks that this user alone can write there, unless `allow_shared_output`; a
// link at `output` that another user could have planted is never followed, whatever the flag.
// Returns whether it existed before. Throws format::OutputRefused (exit 2) or
// std::runtime_error saying what to do otherwise.
bool prepare_output_directory(const std::string& output, bool allow_shared_output);

// A warning on standard error for each stretch of the trace the reader skipped as damaged, and
// when the trace was cut (shm/trace_source.hpp: its writer died before finishing it).
void warn_about_damage(const reader::Trace& trace);
// The same warning for a cut trace under `directory`, for a tool that may not open the traces.
void warn_if_cut(const std::string& directory);

}  // namespace chronicle::cli
