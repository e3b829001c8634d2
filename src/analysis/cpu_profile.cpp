#include "analysis/cpu_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace chronicle::analysis {
namespace {

struct SampleCounts {
  uint64_t self = 0;
  uint64_t total = 0;
};

using CallCounts = std::unordered_map<uint32_t, std::map<uint32_t, uint64_t>>;  // function -> other -> samples

// Each function on the stack once, so that recursion adds a sample to a total only once.
std::vector<uint32_t> distinct_functions(const std::vector<uint32_t>& frames) {
  std::vector<uint32_t> functions = frames;
  std::sort(functions.begin(), functions.end());
  functions.erase(std::unique(functions.begin(), functions.end()), functions.end());
  return functions;
}

// Each (caller, callee) pair on the stack once, for the same reason.
std::vector<std::pair<uint32_t, uint32_t>> distinct_calls(const std::vector<uint32_t>& leaf_first) {
  std::vector<std::pair<uint32_t, uint32_t>> calls;
  for (size_t k = 1; k < leaf_first.size(); ++k) calls.emplace_back(leaf_first[k], leaf_first[k - 1]);
  std::sort(calls.begin(), calls.end());
  calls.erase(std::unique(calls.begin(), calls.end()), calls.end());
  return calls;
}

std::unordered_map<uint32_t, SampleCounts> count_functions(const std::map<std::vector<uint32_t>, uint64_t>& stacks) {
  std::unordered_map<uint32_t, SampleCounts> counts;
  for (const auto& [frames, samples] : stacks) {
    if (frames.empty()) continue;
    counts[frames.front()].self += samples;
    for (uint32_t function : distinct_functions(frames)) counts[function].total += samples;
  }
  return counts;
}

std::vector<std::pair<uint32_t, uint64_t>> largest_first(const std::map<uint32_t, uint64_t>& samples_by_function) {
  std::vector<std::pair<uint32_t, uint64_t>> sorted(samples_by_function.begin(), samples_by_function.end());
  // Stable on a map's id order: ties stay by id.
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

// flamegraph.pl splits frames on ';' and lines on '\n': neither may stay inside a name.
std::string folded_frame(std::string name) {
  std::replace(name.begin(), name.end(), ';', ':');
  std::replace(name.begin(), name.end(), '\n', ' ');
  return name;
}

double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * part / whole;
}

}  // namespace

void CpuProfile::add(std::span<const uint32_t> leaf_first_frames, uint64_t count) {
  if (count == 0) return;
  stacks_[std::vector<uint32_t>(leaf_first_frames.begin(), leaf_first_frames.end())] += count;
  samples_ += count;
}

std::vector<FlatProfileRow> CpuProfile::flat() const {
  std::vector<FlatProfileRow> rows;
  for (const auto& [function, counts] : count_functions(stacks_)) rows.push_back({function, counts.self, counts.total});
  std::sort(rows.begin(), rows.end(), [](const FlatProfileRow& a, const FlatProfileRow& b) {
    if (a.self != b.self) return a.self > b.self;
    if (a.total != b.total) return a.total > b.total;
    return a.function < b.function;
  });
  return rows;
}

std::vector<CallGraphEntry> CpuProfile::call_graph(size_t top) const {
  std::vector<CallGraphEntry> entries;
  for (const auto& [function, counts] : count_functions(stacks_)) {
    CallGraphEntry entry{function, counts.self, counts.total, {}, {}};
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const CallGraphEntry& a, const CallGraphEntry& b) {
    if (a.total != b.total) return a.total > b.total;
    if (a.self != b.self) return a.self > b.self;
    return a.function < b.function;
  });
  entries.resize(std::min(top, entries.size()));

  CallCounts callers;
  CallCounts callees;
  for (const auto& [frames, samples] : stacks_) {
    for (const auto& [caller, callee] : distinct_calls(frames)) {
      callers[callee][caller] += samples;
      callees[caller][callee] += samples;
    }
  }
  for (CallGraphEntry& entry : entries) {
    entry.callers = largest_first(callers[entry.function]);
    entry.callees = largest_first(callees[entry.function]);
  }
  return entries;
}

std::string CpuProfile::folded(const std::function<std::string(uint32_t)>& name_of, std::string_view prefix) const {
  // Two ids can have one name (and names can come out the same once escaped): one line each.
  std::map<std::string, uint64_t> lines;
  for (const auto& [frames, samples] : stacks_) {
    std::string line = folded_frame(std::string(prefix));
    for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
      if (!line.empty()) line += ';';
      line += folded_frame(name_of(*frame));
    }
    if (!line.empty()) lines[line] += samples;
  }
  std::string text;
  for (const auto& [line, samples] : lines) text += fmt::format("{} {}\n", line, samples);
  return text;
}

std::string format_flat_profile(const CpuProfile& profile, const std::function<std::string(uint32_t)>& name_of,
                                size_t max_rows) {
  std::string text = fmt::format("{:>6}{:>12}{:>12}{:>10}  {}\n", "%", "cumulative", "self", "total", "name");
  uint64_t cumulative = 0;
  const std::vector<FlatProfileRow> rows = profile.flat();
  for (size_t k = 0; k < rows.size() && k < max_rows; ++k) {
    const FlatProfileRow& row = rows[k];
    cumulative += row.self;
    text += fmt::format("{:>6.1f}{:>12.1f}{:>12}{:>10}  {}\n", percent(row.self, profile.samples()),
                        percent(cumulative, profile.samples()), row.self, row.total, name_of(row.function));
  }
  return text;
}

std::string format_call_graph(const CpuProfile& profile, const std::function<std::string(uint32_t)>& name_of,
                              size_t top) {
  const std::vector<CallGraphEntry> entries = profile.call_graph(top);
  std::unordered_map<uint32_t, size_t> index_of;
  for (size_t k = 0; k < entries.size(); ++k) index_of[entries[k].function] = k + 1;
  auto labelled = [&](uint32_t function) {
    auto found = index_of.find(function);
    return found == index_of.end() ? name_of(function) : fmt::format("{} [{}]", name_of(function), found->second);
  };
  // A caller's or callee's samples sit under the total column, its name indented past the
  // function's own, as gprof sets them apart.
  auto related_line = [&](const std::pair<uint32_t, uint64_t>& related) {
    return fmt::format("{:>36}      {}\n", related.second, labelled(related.first));
  };

  std::string text = fmt::format("{:<6}{:>8}{:>12}{:>10}  {}\n", "index", "% total", "self", "total", "name");
  const std::string separator(48, '-');
  for (size_t k = 0; k < entries.size(); ++k) {
    const CallGraphEntry& entry = entries[k];
    for (const auto& caller : entry.callers) text += related_line(caller);
    text += fmt::format("{:<6}{:>8.1f}{:>12}{:>10}  {}\n", fmt::format("[{}]", k + 1),
                        percent(entry.total, profile.samples()), entry.self, entry.total, labelled(entry.function));
    for (const auto& callee : entry.callees) text += related_line(callee);
    text += separator + '\n';
  }
  return text;
}

}  // namespace chronicle::analysis
