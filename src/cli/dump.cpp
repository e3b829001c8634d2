// `chronicle dump DIR`: one event a line, names resolved, wall-clock time, thread, fields.
#include <fnmatch.h>

#include <fmt/format.h>

#include "cli/common.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::cli {
namespace {

struct DumpOptions {
  std::string directory;
  std::string category;
  std::string name;
  uint64_t limit = 0;
};

bool matches(const std::string& pattern, const std::string& text) {
  return pattern.empty() || fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

std::string_view type_name(format::EventId type) {
  switch (type) {
    case format::EventId::span_begin: return "span_begin";
    case format::EventId::span_end: return "span_end";
    case format::EventId::instant: return "instant";
    case format::EventId::note: return "note";
    case format::EventId::counter:
    case format::EventId::counter_float: return "counter";
  }
  return "?";
}

int run_dump(const DumpOptions& options) {
  const auto traces = reader::find_traces(options.directory);
  if (traces.empty())
    throw reader::TraceError(options.directory, 0, "no trace here (no metadata file in it or its subdirectories)");
  uint64_t printed = 0;
  std::string line;
  for (const auto& directory : traces) {
    reader::Trace trace(directory);
    if (traces.size() > 1)
      fmt::print("# {} (pid {}, {})\n", directory, trace.description().pid, trace.description().process_name);
    std::map<uint32_t, std::string> thread_labels;
    for (const auto& stream : trace.streams()) thread_labels[stream.thread_id] = trace.thread_name(stream.thread_id);
    trace.for_each_event([&](const reader::Event& event) {
      const reader::Site* site = trace.site(event.name_id);
      const std::string unknown = fmt::format("#{}", event.name_id);
      const std::string& category = site ? site->category : unknown;
      const std::string& name = site ? site->name : unknown;
      if (!matches(options.category, category) || !matches(options.name, name)) return true;
      line.clear();
      fmt::format_to(std::back_inserter(line), "{} {:>7} {:<15} {:<10} {}/{}", trace.format_time(event.ticks),
                     event.thread_id, thread_labels[event.thread_id], type_name(event.type), category, name);
      switch (event.type) {
        case format::EventId::counter: fmt::format_to(std::back_inserter(line), " value={}", event.value); break;
        case format::EventId::counter_float:
          fmt::format_to(std::back_inserter(line), " value={}", event.value_float);
          break;
        case format::EventId::note: fmt::format_to(std::back_inserter(line), " text=\"{}\"", event.text); break;
        default: break;
      }
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
      ++printed;
      return options.limit == 0 || printed < options.limit;
    });
    for (const auto& stream : trace.streams())
      if (stream.events_discarded > 0)
        fmt::print(stderr, "chronicle: {} events discarded in thread {} ({})\n", human_count(stream.events_discarded),
                   stream.thread_id, stream.path);
    if (options.limit != 0 && printed >= options.limit) break;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command add_dump(CLI::App& app) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* command = app.add_subcommand("dump", "Print a trace's events, one a line, in time order");
  command->add_option("directory", options->directory, "Trace directory")->required();
  command->add_option("--category", options->category, "Only events of this category (a glob pattern)");
  command->add_option("--name", options->name, "Only events of this name (a glob pattern)");
  command->add_option("--limit", options->limit, "Stop after this many events");
  return {command, [options] { return run_dump(*options); }};
}

}  // namespace chronicle::cli
