// `chronicle`: one command, a subcommand per job; each is a thin layer over the libraries.
#include <fmt/format.h>

#include <cstdio>

#include <vector>

#include "cli/common.hpp"
#include "reader/trace_reader.hpp"

namespace {

// The subcommand the user was typing when parsing failed (the deepest one CLI11 got to), for
// its usage text.
const CLI::App& innermost_subcommand(const CLI::App& app) {
  for (const CLI::App* subcommand : app.get_subcommands())
    if (subcommand->parsed()) return innermost_subcommand(*subcommand);
  return app;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chronicle::cli;
  CLI::App app{"chronicle: record C++ programs' trace points as CTF traces, and read them"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  app.set_version_flag("--version", "chronicle " CHRONICLE_VERSION, "Print the version and exit");
  std::vector<Command> commands = {add_record(app), add_snapshot(app), add_dump(app),    add_stats(app),
                                   add_top(app),    add_metrics(app),  add_export(app),  add_view(app),
                                   add_merge(app),  add_ctl(app),      add_convert(app), add_recover(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help, --help-all and --version arrive as "errors" that succeed: CLI11 prints them.
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
    // Anything else is a usage error: CLI11's own codes (105, 106...) mean nothing to a shell
    // script, which expects 2 as other command-line tools give it.
    fmt::print(stderr, "chronicle: error: {}\n\n{}", error.what(), innermost_subcommand(app).help());
    return kExitUsage;
  }
  try {
    for (const Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const chronicle::format::InputError& error) {
    // fprintf, not fmt::print: stderr may be closed (record ignores SIGPIPE), and fmt would throw.
    std::fprintf(stderr, "chronicle: error: %s\n", error.what());
    return kExitBadInput;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chronicle: error: %s\n", error.what());
    return kExitFailure;
  }
  return kExitFailure;
}
