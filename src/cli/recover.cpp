// `chronicle recover DIR`: appends to a trace whose writer died before finishing it (SIGKILL,
// the OOM killer) what its mapping still holds, then removes the mapping.
// `chronicle recover --list`: the mappings dead processes of this user left behind;
// `chronicle recover --clean`: removes them.
#include <fmt/format.h>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "collector/recovery.hpp"

namespace chronicle::cli {
namespace {

struct RecoverOptions {
  std::string directory;
  bool list = false;
  bool clean = false;
  std::vector<std::string> places;  // where --list and --clean look (default: session_mapping_places())
};

int recover_directory(const std::string& directory) {
  const collector::Recovery recovery = collector::recover_trace(directory);
  const collector::CollectorStats& appended = recovery.appended;
  fmt::print("chronicle: recovered {} events ({}) from {} into {}; the mapping is removed\n",
             human_count(appended.events), human_bytes(appended.bytes), recovery.mapping_path, directory);
  if (const std::string losses = format::describe_losses(appended.losses()); !losses.empty())
    fmt::print(stderr, "chronicle: lost: {}\n", losses);
  return 0;
}

int list_or_clean(const RecoverOptions& options) {
  const bool clean = options.clean;
  const auto leftovers =
      collector::leftover_mappings(options.places.empty() ? session_mapping_places() : options.places);
  int refused = 0;
  for (const collector::LeftoverMapping& mapping : leftovers) {
    if (!clean) {
      fmt::print("{}\tpid {}\t{}\n", mapping.path, mapping.pid, human_bytes(mapping.bytes));
    } else if (collector::remove_leftover_mapping(mapping.path)) {
      fmt::print("removed {} ({})\n", mapping.path, human_bytes(mapping.bytes));
    } else {
      fmt::print(stderr, "chronicle: {}: not removed (a process holds it now)\n", mapping.path);
      ++refused;
    }
  }
  if (leftovers.empty()) fmt::print(stderr, "chronicle: no mapping left behind by a dead process of this user\n");
  return refused == 0 ? 0 : kExitFailure;
}

}  // namespace

Command add_recover(CLI::App& app) {
  auto options = std::make_shared<RecoverOptions>();
  CLI::App* command = app.add_subcommand(
      "recover", "Append to a trace cut by its writer's death what its mapping still holds; list or clean leftovers");
  command->add_option("DIR", options->directory, "A trace that tools say was cut");
  command->add_flag("--list", options->list, "List the mappings dead processes of this user left behind");
  command->add_flag("--clean", options->clean,
                    "Remove them (those that cut traces name too: recover those traces first)");
  command->add_option("--in", options->places,
                      "With --list or --clean: look only in this directory (default: $CHRONICLE_SHM_DIR, /dev/shm "
                      "and /dev/shm/chronicle-record-*)");
  return {command, [options] {
            const int modes = !options->directory.empty() + options->list + options->clean;
            if (modes != 1) {
              fmt::print(stderr, "chronicle: recover: give one of DIR, --list, --clean\n");
              return kExitUsage;
            }
            if (!options->directory.empty()) return recover_directory(options->directory);
            return list_or_clean(*options);
          }};
}

}  // namespace chronicle::cli
