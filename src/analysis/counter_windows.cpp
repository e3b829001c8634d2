#include "analysis/counter_windows.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>
#include <stdexcept>

namespace chronicle::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double parse_number(std::string_view text, std::string_view whole) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    throw std::invalid_argument(fmt::format("\"{}\" is not a number", whole));
  return value;
}

}  // namespace

void CounterSeries::add(int64_t time_ns, double value) {
  if (!times_ns_.empty()) {
    const double held = values_.back() * static_cast<double>(time_ns - times_ns_.back());
    prefix_area_.push_back(prefix_area_.back() + held);
  } else {
    prefix_area_.push_back(0);
  }
  times_ns_.push_back(time_ns);
  values_.push_back(value);
  prefix_values_.push_back(prefix_values_.back() + value);
}

double CounterSeries::area_until(int64_t time_ns) const {
  // The last sample at or before time_ns (the caller keeps time_ns >= the first sample).
  const size_t at =
      static_cast<size_t>(std::upper_bound(times_ns_.begin(), times_ns_.end(), time_ns) - times_ns_.begin()) - 1;
  return prefix_area_[at] + values_[at] * static_cast<double>(time_ns - times_ns_[at]);
}

WindowStats CounterSeries::window(int64_t from_ns, int64_t to_ns) const {
  WindowStats stats;
  stats.from_ns = from_ns;
  stats.to_ns = to_ns;
  const size_t begin =
      static_cast<size_t>(std::lower_bound(times_ns_.begin(), times_ns_.end(), from_ns) - times_ns_.begin());
  const size_t end =
      static_cast<size_t>(std::upper_bound(times_ns_.begin(), times_ns_.end(), to_ns) - times_ns_.begin());
  stats.samples = end > begin ? end - begin : 0;
  stats.sum = stats.samples ? prefix_values_[end] - prefix_values_[begin] : 0;
  stats.mean = stats.samples ? stats.sum / static_cast<double>(stats.samples) : kNaN;
  const double seconds = static_cast<double>(to_ns - from_ns) / 1e9;
  if (kind_ == SeriesKind::increments)
    stats.rate_per_second = seconds > 0 ? stats.sum / seconds : kNaN;
  else
    stats.rate_per_second = seconds > 0 ? static_cast<double>(stats.samples) / seconds : kNaN;
  if (kind_ == SeriesKind::level) {
    stats.last = end > 0 ? values_[end - 1] : kNaN;
    // The level is known from the first sample on; the average covers what is known.
    const int64_t known_from = times_ns_.empty() ? to_ns : std::max(from_ns, times_ns_.front());
    if (times_ns_.empty() || to_ns < known_from)
      stats.time_average = kNaN;
    else if (to_ns == known_from)
      stats.time_average = stats.last;
    else
      stats.time_average = (area_until(to_ns) - area_until(known_from)) / static_cast<double>(to_ns - known_from);
  } else {
    stats.last = prefix_values_[end];
    stats.time_average = kNaN;
  }
  return stats;
}

CounterWindows::CounterWindows(const reader::Trace& trace) {
  CounterReader counters(trace);
  bool any = false;
  trace.for_each_event([&](const reader::Event& event) {
    const int64_t time_ns = trace.to_unix_ns(event.ticks);
    if (!any) first_ns_ = time_ns;
    any = true;
    last_ns_ = time_ns;
    const std::optional<CounterReading> reading = counters.read(event);
    if (!reading) return true;
    // Series are numbered in order of first use: a new one is the next.
    for (size_t next = series_.size(); next <= reading->series; ++next)
      series_.emplace_back(counters.series()[next].label, counters.series()[next].kind);
    series_[reading->series].add(time_ns, reading->change);
    return true;
  });
  std::sort(series_.begin(), series_.end(),
            [](const CounterSeries& a, const CounterSeries& b) { return a.label() < b.label(); });
}

int64_t parse_duration(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double ns;
  };
  // Longest suffixes first, so "ms" is not read as "s".
  constexpr Unit units[] = {{"ns", 1},   {"us", 1e3},   {"ms", 1e6},   {"s", 1e9},
                            {"m", 60e9}, {"h", 3600e9}, {"d", 86400e9}};
  for (const Unit& unit : units) {
    if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix)) {
      const std::string_view number = text.substr(0, text.size() - unit.suffix.size());
      if (number.find_first_not_of("0123456789.") != std::string_view::npos) continue;
      return static_cast<int64_t>(std::llround(parse_number(number, text) * unit.ns));
    }
  }
  if (!text.empty() && text.find_first_not_of("0123456789.") == std::string_view::npos)
    return static_cast<int64_t>(std::llround(parse_number(text, text) * 1e9));
  throw std::invalid_argument(fmt::format("\"{}\" is not a duration (e.g. 250ms, 30s, 5m, 2h)", text));
}

int64_t parse_time_point(std::string_view text, int64_t trace_first_ns, int64_t trace_last_ns) {
  if (text.starts_with('+')) return trace_first_ns + parse_duration(text.substr(1));
  if (text.starts_with('-')) return trace_last_ns - parse_duration(text.substr(1));
  if (text.size() >= 19 && text[4] == '-' && text[7] == '-' && (text[10] == 'T' || text[10] == ' ')) {
    std::tm parts{};
    const std::string copy(text);
    if (std::sscanf(copy.c_str(), "%4d-%2d-%2d%*c%2d:%2d:%2d", &parts.tm_year, &parts.tm_mon, &parts.tm_mday,
                    &parts.tm_hour, &parts.tm_min, &parts.tm_sec) != 6)
      throw std::invalid_argument(fmt::format("\"{}\" is not a time (YYYY-MM-DDTHH:MM:SS[.fff][Z])", text));
    parts.tm_year -= 1900;
    parts.tm_mon -= 1;
    int64_t ns = static_cast<int64_t>(timegm(&parts)) * 1'000'000'000;
    std::string_view rest = text.substr(19);
    if (rest.ends_with('Z')) rest.remove_suffix(1);
    if (!rest.empty()) {
      if (rest[0] != '.' || rest.size() == 1 || rest.size() > 10 ||
          rest.substr(1).find_first_not_of("0123456789") != std::string_view::npos)
        throw std::invalid_argument(fmt::format("\"{}\" is not a time (YYYY-MM-DDTHH:MM:SS[.fff][Z])", text));
      int64_t fraction = 0;
      for (char digit : rest.substr(1)) fraction = fraction * 10 + (digit - '0');
      for (size_t digits = rest.size() - 1; digits < 9; ++digits) fraction *= 10;
      ns += fraction;
    }
    return ns;
  }
  if (!text.empty() && text.find_first_not_of("0123456789.") == std::string_view::npos)
    return static_cast<int64_t>(std::llround(parse_number(text, text) * 1e9));
  throw std::invalid_argument(fmt::format(
      "\"{}\" is not a time: use +30s (after the start), -30s (before the end), an ISO time, or Unix seconds", text));
}

}  // namespace chronicle::analysis
