// `chronicle`: one command, a subcommand per job; each is a thin layer over the libraries.
#include <fmt/format.h>

#include <cstdio>

#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/reference.hpp"
#include "reader/trace_reader.hpp"

namespace {

// The subcommand the user was typing when parsing failed (the deepest one CLI11 got to), for
// its usage text.
CLI::App& innermost_subcommand(CLI::App& app) {
  for (CLI::App* subcommand : app.get_subcommands())
    if (subcommand->parsed()) return innermost_subcommand(*subcommand);
  return app;
}

// "chronicle ctl" for `ctl level`: the names above a subcommand, for its usage line as --help
// prints it ("Usage: chronicle ctl level ...").
std::string names_above(const CLI::App& command) {
  std::string names;
  for (const CLI::App* parent = command.get_parent(); parent != nullptr; parent = parent->get_parent())
    names = names.empty() ? parent->get_name() : parent->get_name() + " " + names;
  return names;
}

// Each subcommand's --help ends with its reference text (src/cli/reference.cpp), found by its
// path under `chronicle` ("metrics serve"). Done once all are registered: CLI11 copies a parent's
// footer into a subcommand made after it was set.
void add_reference_footers(CLI::App& app, const std::string& path) {
  app.footer(std::string(chronicle::cli::reference_text(path)));
  for (CLI::App* subcommand : app.get_subcommands({}))
    add_reference_footers(*subcommand, path.empty() ? subcommand->get_name() : path + " " + subcommand->get_name());
}

// `chronicle help [CMD [SUBCMD]]`: what `chronicle CMD SUBCMD --help` prints. Exit 2 for a name
// that is no subcommand.
int print_help(CLI::App& app, const std::vector<std::string>& words) {
  CLI::App* command = &app;
  for (const std::string& word : words) {
    CLI::App* found = nullptr;
    for (CLI::App* subcommand : command->get_subcommands({}))
      if (subcommand->get_name() == word) found = subcommand;
    if (!found) {
      fmt::print(stderr, "chronicle: error: no subcommand '{}' (chronicle --help lists them)\n", word);
      return chronicle::cli::kExitUsage;
    }
    command = found;
  }
  fmt::print("{}", command->help(names_above(*command)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chronicle::cli;
  // Named, not argv[0]: "Usage: chronicle ..." whatever path ran it (docs/cli.md is this help).
  CLI::App app{"chronicle: record C++ programs' trace points as CTF traces, and read them", "chronicle"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  app.set_version_flag("--version", "chronicle " CHRONICLE_VERSION, "Print the version and exit");
  std::vector<Command> commands = {add_record(app), add_snapshot(app), add_dump(app),    add_stats(app),
                                   add_top(app),    add_metrics(app),  add_export(app),  add_view(app),
                                   add_merge(app),  add_ctl(app),      add_convert(app), add_recover(app)};
  std::vector<std::string> help_words;
  CLI::App* help = app.add_subcommand("help", "Print a subcommand's help and reference (as CMD --help does)");
  help->add_option("command", help_words, "The subcommand, and a subcommand of it (e.g. metrics serve)");
  try {
    add_reference_footers(app, "");
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help, --help-all and --version arrive as "errors" that succeed: CLI11 prints them.
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
    // Anything else is a usage error: CLI11's own codes (105, 106...) mean nothing to a shell
    // script, which expects 2 as other command-line tools give it.
    // The usage and options only: the reference text is for --help, not for a mistyped flag.
    CLI::App& command = innermost_subcommand(app);
    command.footer("");
    fmt::print(stderr, "chronicle: error: {}\n\n{}", error.what(), command.help(names_above(command)));
    return kExitUsage;
  }
  if (help->parsed()) return print_help(app, help_words);
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
