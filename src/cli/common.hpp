#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace chronicle::reader {
class Trace;
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
Command add_dump(CLI::App& app);
Command add_stats(CLI::App& app);
Command add_top(CLI::App& app);
Command add_metrics(CLI::App& app);
Command add_export(CLI::App& app);
Command add_view(CLI::App& app);

// Whether standard error is a terminal (progress lines go there only then).
bool stderr_is_terminal();
std::string human_bytes(uint64_t bytes);
std::string human_count(uint64_t count);
std::string timestamp_for_path();

// The trace session mappings (chronicle-PID-N.shm) of process `pid`, newest first, wherever
// they are: in $CHRONICLE_SHM_DIR when set, in /dev/shm, and in the directories `chronicle
// record` gives the programs it runs (/dev/shm/chronicle-record-RECORDPID/). Every reader of a
// live process by pid finds its session here. `searched` (if given) names the places looked in.
std::vector<std::string> find_session_mappings(int pid, std::string* searched = nullptr);

// A warning on standard error for each stretch of the trace the reader skipped as damaged.
void warn_about_damage(const reader::Trace& trace);

}  // namespace chronicle::cli
