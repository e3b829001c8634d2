// `chronicle`: one command, a subcommand per job; each is a thin layer over the libraries.
#include <fmt/format.h>

#include <vector>

#include "cli/common.hpp"
#include "reader/trace_reader.hpp"

int main(int argc, char** argv) {
  using namespace chronicle::cli;
  CLI::App app{"chronicle: record C++ programs' trace points as CTF traces, and read them"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  std::vector<Command> commands = {add_record(app), add_snapshot(app), add_dump(app), add_stats(app),
                                   add_top(app),    add_metrics(app), add_export(app), add_view(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  try {
    for (const Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const chronicle::format::InputError& error) {
    fmt::print(stderr, "chronicle: error: {}\n", error.what());
    return kExitBadInput;
  } catch (const std::exception& error) {
    fmt::print(stderr, "chronicle: error: {}\n", error.what());
    return kExitFailure;
  }
  return kExitFailure;
}
