// `chronicle merge A B ... -o OUT`: several traces (processes, hosts, record runs) made one
// directory of traces, each host's clock put on the first one's (src/merge).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>

#include "cli/common.hpp"
#include "merge/otlp_input.hpp"
#include "merge/trace_merge.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::cli {
namespace {

struct MergeOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool allow_shared_output = false;
};

// Copies smaller than this finish before a progress line would help.
constexpr uint64_t kProgressFrom = 256ull << 20;

std::string signed_duration(double ns) {
  const double size = std::fabs(ns);
  const char* sign = ns < 0 ? "-" : "+";
  if (size < 1e3) return fmt::format("{}{:.0f} ns", sign, size);
  if (size < 1e6) return fmt::format("{}{:.3f} us", sign, size / 1e3);
  if (size < 1e9) return fmt::format("{}{:.3f} ms", sign, size / 1e6);
  return fmt::format("{}{:.6f} s", sign, size / 1e9);
}

std::string bound_text(double ns) {
  return std::isinf(ns) ? "unknown" : signed_duration(ns).replace(0, 1, "±");
}

void print_hosts(const merge::MergePlan& plan) {
  for (const merge::Host& host : plan.hosts) {
    const merge::HostAlignment& alignment = host.alignment;
    const std::string traces = fmt::format("{} trace{}", host.traces.size(), host.traces.size() == 1 ? "" : "s");
    if (alignment.source == merge::HostAlignment::Source::reference) {
      fmt::print("host {} ({}): the reference clock (its wall clock){}\n", host.name, traces,
                 host.time_resolution_ns == 0
                     ? ""
                     : fmt::format("; its times are {} (detected)", merge::resolution_text(host.time_resolution_ns)));
      continue;
    }
    const std::string& parent = plan.hosts[alignment.parent].name;
    const std::string pairs =
        alignment.pairs == 0 ? "0 pairs" : fmt::format("{} pairs with {}", alignment.pairs, parent);
    fmt::print("host {} ({}): offset {}, drift {:+.3f} ppb, bound {}, {}: {}\n", host.name, traces,
               signed_duration(alignment.to_reference.offset_ns), alignment.to_reference.drift * 1e9,
               bound_text(alignment.bound_ns), pairs, alignment.reason);
  }
}

merge::CopyProgress copy_progress_line() {
  if (!stderr_is_terminal()) return {};
  return [](uint64_t copied, uint64_t total) {
    if (total < kProgressFrom) return;
    if (copied >= total) {
      fmt::print(stderr, "\r\033[K");
      return;
    }
    fmt::print(stderr, "\rchronicle: copying: {} of {} ({:.0f}%)", human_bytes(copied), human_bytes(total),
               100.0 * static_cast<double>(copied) / static_cast<double>(total));
  };
}

// An output inside an input would become part of that input for every later reader of it.
void refuse_output_inside_inputs(const std::vector<reader::Trace>& traces, const std::string& output) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path out = fs::weakly_canonical(output, error);
  for (const reader::Trace& trace : traces) {
    const fs::path input = fs::weakly_canonical(trace.directory(), error);
    const auto [input_end, out_at] = std::mismatch(input.begin(), input.end(), out.begin(), out.end());
    if (input_end == input.end())
      throw std::invalid_argument(
          fmt::format("{} is inside the input trace {}: choose another directory with -o", output, trace.directory()));
  }
}

// Where OTLP/JSON inputs become traces before they are merged (a private temporary directory,
// removed on every way out).
class StagingDirectory {
 public:
  StagingDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "chronicle-merge-otlp-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error(fmt::format("cannot create a directory like {}: {}", pattern, std::strerror(errno)));
    path_ = pattern;
  }
  ~StagingDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void warn_about_left_out(const std::string& file, const merge::OtlpConversion& conversion) {
  const uint64_t count = conversion.left_out_count();
  if (count == 0) return;
  std::string reasons;
  for (const auto& [reason, spans] : conversion.left_out)
    reasons += fmt::format("{}{} with {}", reasons.empty() ? "" : ", ", spans, reason);
  fmt::print(stderr, "chronicle: warning: {}: {} span{} left out: {} (the first: {})\n", file, count,
             count == 1 ? "" : "s", reasons, conversion.first_left_out);
}

// The inputs' trace directories, OTLP/JSON files converted into `staging`; `origins` says where
// each came from, for the summary.
std::vector<std::string> input_traces(const MergeOptions& options, std::optional<StagingDirectory>& staging,
                                      std::vector<std::string>& origins) {
  std::vector<std::string> directories;
  std::set<std::filesystem::path> files;
  for (const std::string& input : options.inputs) {
    if (!merge::is_otlp_input(input)) {
      for (std::string& directory : reader::find_traces(input)) {
        origins.push_back(directory);
        directories.push_back(std::move(directory));
      }
      continue;
    }
    std::error_code error;
    if (!files.insert(std::filesystem::weakly_canonical(input, error)).second)
      throw std::invalid_argument(fmt::format("{} is given twice: give each input once", input));
    if (!staging) staging.emplace();
    const merge::OtlpConversion conversion = merge::convert_otlp_file(input, staging->path());
    warn_about_left_out(input, conversion);
    for (const merge::OtlpProcess& process : conversion.processes) {
      origins.push_back(fmt::format("{} (service {}, {} span{})", input, process.service, process.spans,
                                    process.spans == 1 ? "" : "s"));
      directories.push_back(process.directory);
    }
  }
  return directories;
}

int run_merge(const MergeOptions& options) {
  std::optional<StagingDirectory> staging;
  std::vector<std::string> origins;
  const std::vector<std::string> directories = input_traces(options, staging, origins);
  const std::vector<reader::Trace> traces = merge::open_traces(directories);
  for (const reader::Trace& trace : traces) warn_about_damage(trace);
  const merge::MergePlan plan = merge::plan_merge(traces, merge::find_message_pairs(traces));
  refuse_output_inside_inputs(traces, options.output);
  const bool existed = prepare_output_directory(options.output, options.allow_shared_output);
  uint64_t bytes = 0;
  try {
    bytes = merge::write_merge(traces, plan, options.output, copy_progress_line());
  } catch (...) {
    // Nothing half-merged is left behind: what this run made goes.
    std::error_code ignored;
    for (const merge::PlannedTrace& planned : plan.traces)
      std::filesystem::remove_all(options.output + "/" + planned.subdirectory, ignored);
    if (!existed) std::filesystem::remove(options.output, ignored);
    throw;
  }
  fmt::print("chronicle: merged {} trace{} from {} host{} into {} ({} copied), {} message pair{} between hosts\n",
             traces.size(), traces.size() == 1 ? "" : "s", plan.hosts.size(), plan.hosts.size() == 1 ? "" : "s",
             options.output, human_bytes(bytes), plan.pairs, plan.pairs == 1 ? "" : "s");
  print_hosts(plan);
  for (size_t index = 0; index < traces.size(); ++index)
    fmt::print("  {} -> {}/{}\n", origins[index], options.output, plan.traces[index].subdirectory);
  return 0;
}

}  // namespace

Command add_merge(CLI::App& app) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* command = app.add_subcommand(
      "merge", "Make one trace of several (processes, hosts, record runs), each host's clock aligned on the first's");
  command
      ->add_option("traces", options->inputs,
                   "Trace directories (or record runs' directories), or OTLP/JSON files of spans")
      ->required();
  command->add_option("-o,--output", options->output, "The merged trace's directory (new, or empty)")->required();
  command->add_flag("--allow-shared-output", options->allow_shared_output,
                    "Write into a directory other users may write in too");
  return {command, [options] { return run_merge(*options); }};
}

}  // namespace chronicle::cli
