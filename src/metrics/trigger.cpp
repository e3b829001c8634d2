#include "metrics/trigger.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "metrics/query.hpp"

namespace chronicle::metrics {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

[[noreturn]] void refuse(std::string_view text, std::string_view why) {
  throw std::invalid_argument(fmt::format("--trigger '{}': {}", text, why));
}

// {a="x",b=y}: the labels a series must have.
LabelList parse_labels(std::string_view whole, std::string_view text) {
  LabelList out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view pair = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos || equals == 0) refuse(whole, fmt::format("'{}' is not label=value", pair));
    std::string_view value = trim(pair.substr(equals + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out.emplace_back(std::string(trim(pair.substr(0, equals))), std::string(value));
  }
  return out;
}

void parse_measure(std::string_view whole, std::string_view text, TriggerCondition& condition) {
  if (text.empty() || text == "value") {
    condition.measure = TriggerMeasure::value;
  } else if (text == "rate") {
    condition.measure = TriggerMeasure::rate;
  } else if (text == "mean" || text == "avg") {
    condition.measure = TriggerMeasure::mean;
  } else if (text.size() >= 3 && text[0] == 'p' && std::isdigit(static_cast<unsigned char>(text[1]))) {
    // p50 -> 0.50, p99 -> 0.99, p999 -> 0.999
    const std::string digits(text.substr(1));
    for (char c : digits)
      if (!std::isdigit(static_cast<unsigned char>(c))) refuse(whole, fmt::format("'{}' is not a quantile", text));
    condition.measure = TriggerMeasure::quantile;
    condition.quantile = std::stod("0." + digits);
  } else {
    refuse(whole, fmt::format("'{}' is not a measure (value, rate, mean, p50, p90, p99, p999...)", text));
  }
}

}  // namespace

TriggerCondition parse_trigger(std::string_view text) {
  TriggerCondition condition;
  condition.text = std::string(trim(text));
  const size_t op = text.find_first_of("<>");
  if (op == std::string_view::npos) refuse(text, "no comparison (>, >=, <, <=)");
  condition.above = text[op] == '>';
  condition.inclusive = op + 1 < text.size() && text[op + 1] == '=';
  std::string_view left = trim(text.substr(0, op));
  std::string_view right = trim(text.substr(op + (condition.inclusive ? 2 : 1)));
  if (right.ends_with("/s")) right = trim(right.substr(0, right.size() - 2));
  const auto [end, error] = std::from_chars(right.data(), right.data() + right.size(), condition.threshold);
  if (error != std::errc() || end != right.data() + right.size() || !std::isfinite(condition.threshold))
    refuse(text, fmt::format("'{}' is not a number", right));
  // The measure: after a ':' or a space that follows the labels (label values may hold either).
  std::string_view measure_text;
  const size_t labels_end = left.rfind('}');
  const size_t from = labels_end == std::string_view::npos ? 0 : labels_end + 1;
  if (const size_t colon = left.find(':', from); colon != std::string_view::npos) {
    measure_text = trim(left.substr(colon + 1));
    left = trim(left.substr(0, colon));
  } else if (const size_t space = left.find_first_of(" \t", from); space != std::string_view::npos) {
    measure_text = trim(left.substr(space + 1));
    left = trim(left.substr(0, space));
  }
  parse_measure(text, measure_text, condition);
  if (const size_t brace = left.find('{'); brace != std::string_view::npos) {
    if (!left.ends_with('}')) refuse(text, "labels open with '{' and end with '}'");
    condition.where = parse_labels(text, left.substr(brace + 1, left.size() - brace - 2));
    left = trim(left.substr(0, brace));
  }
  if (left.empty()) refuse(text, "no metric name");
  for (char c : left)
    if (std::isspace(static_cast<unsigned char>(c))) refuse(text, fmt::format("'{}' is not a metric name", left));
  condition.metric = std::string(left);
  return condition;
}

std::optional<double> measure(const TriggerCondition& condition, const MetricsSnapshot& before,
                              const MetricsSnapshot& after) {
  const auto total = [&](const std::vector<Series>& series) -> std::optional<double> {
    if (series.empty()) return std::nullopt;
    double sum = 0;
    for (const Series& each : series) sum += each.value;
    return sum;
  };
  switch (condition.measure) {
    case TriggerMeasure::value:
      return total(select(after, condition.metric, condition.where));
    case TriggerMeasure::rate:
      if (after.monotonic_ns <= before.monotonic_ns) return std::nullopt;
      return total(rates(before, after, condition.metric, condition.where));
    case TriggerMeasure::quantile:
    case TriggerMeasure::mean: {
      std::optional<MetricSample> now = merge_histograms(after, condition.metric, condition.where);
      if (!now) return std::nullopt;
      // What the window added: the buckets now less those at its start.
      if (std::optional<MetricSample> then = merge_histograms(before, condition.metric, condition.where);
          then && then->buckets.size() == now->buckets.size()) {
        for (size_t i = 0; i < now->buckets.size(); ++i) now->buckets[i] -= std::min(then->buckets[i], now->buckets[i]);
        now->count -= std::min(then->count, now->count);
        now->sum -= then->sum;
      }
      if (now->count == 0) return std::nullopt;
      if (condition.measure == TriggerMeasure::mean) return now->sum / static_cast<double>(now->count);
      const double q = quantile(*now, condition.quantile);
      return std::isnan(q) ? std::nullopt : std::optional(q);
    }
  }
  return std::nullopt;
}

TriggerState::TriggerState(TriggerCondition condition, double hysteresis) : condition_(std::move(condition)) {
  const double margin = std::abs(condition_.threshold) * hysteresis;
  rearm_line_ = condition_.above ? condition_.threshold - margin : condition_.threshold + margin;
}

TriggerState::Step TriggerState::observe(std::optional<double> value) {
  if (!value) return Step::none;
  const double v = *value;
  const double line = condition_.threshold;
  const bool crossed =
      condition_.above ? (condition_.inclusive ? v >= line : v > line) : (condition_.inclusive ? v <= line : v < line);
  if (armed_) {
    if (!crossed) return Step::none;
    armed_ = false;
    return Step::fired;
  }
  // Back on the safe side of the line, by the margin.
  const bool back = condition_.above ? v <= rearm_line_ : v >= rearm_line_;
  if (crossed || !back) return Step::none;
  armed_ = true;
  return Step::rearmed;
}

const MetricsSnapshot& SnapshotWindow::add(MetricsSnapshot now) {
  kept_.push_back(std::move(now));
  const uint64_t newest = kept_.back().monotonic_ns;
  const auto window = static_cast<uint64_t>(window_.count());
  // Keep one snapshot at least `window` old: drop the oldest while the next one is old enough too.
  while (kept_.size() > 2 && newest - kept_[1].monotonic_ns >= window) kept_.pop_front();
  return kept_.front();
}

}  // namespace chronicle::metrics
