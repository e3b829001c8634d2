#include "metrics/query.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

namespace chronicle::metrics {
namespace {

bool has_labels(const LabelList& labels, const LabelList& wanted) {
  for (const auto& pair : wanted)
    if (std::find(labels.begin(), labels.end(), pair) == labels.end()) return false;
  return true;
}

std::string label_value(const LabelList& labels, const std::string& key) {
  for (const auto& [name, value] : labels)
    if (name == key) return value;
  return {};
}

std::string series_key(std::string_view name, const LabelList& labels) {
  return std::string(name) + '\n' + encode_labels(labels);
}

// Each series' value in `before` (the last one, when a crafted mapping repeats a series), of
// metric `name` only when one is given.
std::unordered_map<std::string, double> values_by_series(const MetricsSnapshot& before,
                                                         std::optional<std::string_view> name) {
  std::unordered_map<std::string, double> values;
  for (const MetricSample& old : before.metrics)
    if (!name || old.name == *name) values.insert_or_assign(series_key(old.name, old.labels), old.value);
  return values;
}

double rate_of(const MetricSample& sample, const std::unordered_map<std::string, double>& earlier, double seconds) {
  if (sample.kind == format::MetricKind::gauge) return sample.value;
  const auto found = earlier.find(series_key(sample.name, sample.labels));
  const double then = found == earlier.end() ? 0 : found->second;
  return seconds > 0 ? (sample.value - then) / seconds : 0;
}

double seconds_between(const MetricsSnapshot& before, const MetricsSnapshot& after) {
  return static_cast<double>(after.monotonic_ns - before.monotonic_ns) / 1e9;
}

}  // namespace

std::optional<Aggregation> parse_aggregation(std::string_view text) {
  if (text == "sum") return Aggregation::sum;
  if (text == "avg") return Aggregation::avg;
  if (text == "max") return Aggregation::max;
  if (text == "min") return Aggregation::min;
  if (text == "count") return Aggregation::count;
  return std::nullopt;
}

std::vector<Series> select(const MetricsSnapshot& snapshot, std::string_view name, const LabelList& where) {
  std::vector<Series> out;
  for (const MetricSample& sample : snapshot.metrics)
    if (sample.name == name && has_labels(sample.labels, where)) out.push_back({sample.labels, sample.value, 1});
  return out;
}

std::vector<Series> rates(const MetricsSnapshot& before, const MetricsSnapshot& after, std::string_view name,
                          const LabelList& where) {
  const double seconds = seconds_between(before, after);
  const auto earlier = values_by_series(before, name);
  std::vector<Series> out;
  for (const MetricSample& sample : after.metrics)
    if (sample.name == name && has_labels(sample.labels, where))
      out.push_back({sample.labels, rate_of(sample, earlier, seconds), 1});
  return out;
}

std::vector<double> sample_rates(const MetricsSnapshot& before, const MetricsSnapshot& after) {
  const double seconds = seconds_between(before, after);
  const auto earlier = values_by_series(before, std::nullopt);
  std::vector<double> out;
  out.reserve(after.metrics.size());
  for (const MetricSample& sample : after.metrics) out.push_back(rate_of(sample, earlier, seconds));
  return out;
}

std::vector<Series> aggregate(std::span<const Series> series, const std::vector<std::string>& by, Aggregation how) {
  std::map<std::vector<std::string>, Series> groups;
  for (const Series& one : series) {
    std::vector<std::string> key;
    for (const auto& label : by) key.push_back(label_value(one.labels, label));
    auto [found, fresh] = groups.try_emplace(key);
    Series& group = found->second;
    if (fresh) {
      for (size_t i = 0; i < by.size(); ++i) group.labels.emplace_back(by[i], key[i]);
      group.members = 0;
      group.value = how == Aggregation::max   ? -std::numeric_limits<double>::infinity()
                    : how == Aggregation::min ? std::numeric_limits<double>::infinity()
                                              : 0;
    }
    ++group.members;
    switch (how) {
      case Aggregation::sum:
      case Aggregation::avg:
        group.value += one.value;
        break;
      case Aggregation::max:
        group.value = std::max(group.value, one.value);
        break;
      case Aggregation::min:
        group.value = std::min(group.value, one.value);
        break;
      case Aggregation::count:
        group.value += 1;
        break;
    }
  }
  std::vector<Series> out;
  out.reserve(groups.size());
  for (auto& [key, group] : groups) {
    if (how == Aggregation::avg) group.value /= static_cast<double>(group.members);
    out.push_back(std::move(group));
  }
  return out;
}

std::vector<Series> drill_down(const MetricsSnapshot& snapshot, std::string_view name, const LabelList& path,
                               const std::string& child_label, Aggregation how) {
  std::vector<std::string> by;
  for (const auto& [key, value] : path) by.push_back(key);
  by.push_back(child_label);
  const auto selected = select(snapshot, name, path);
  return aggregate(selected, by, how);
}

double quantile(const MetricSample& histogram, double q) {
  if (histogram.count == 0 || histogram.buckets.size() != histogram.bounds.size() + 1)
    return std::numeric_limits<double>::quiet_NaN();
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(histogram.count);
  double below = 0;
  for (size_t bucket = 0; bucket < histogram.buckets.size(); ++bucket) {
    const double in_bucket = static_cast<double>(histogram.buckets[bucket]);
    if (below + in_bucket >= rank && in_bucket > 0) {
      // Above the last bound nothing is known but the bound itself (Prometheus does the same).
      if (bucket == histogram.bounds.size()) return histogram.bounds.back();
      const double lower = bucket == 0 ? std::min(0.0, histogram.bounds[0]) : histogram.bounds[bucket - 1];
      const double upper = histogram.bounds[bucket];
      return lower + (upper - lower) * (rank - below) / in_bucket;
    }
    below += in_bucket;
  }
  return histogram.bounds.back();
}

std::optional<MetricSample> merge_histograms(const MetricsSnapshot& snapshot, std::string_view name,
                                             const LabelList& where) {
  std::optional<MetricSample> merged;
  for (const MetricSample& sample : snapshot.metrics) {
    if (sample.kind != format::MetricKind::histogram || sample.name != name || !has_labels(sample.labels, where))
      continue;
    if (!merged) {
      merged = sample;
      merged->labels = where;
      continue;
    }
    if (merged->bounds != sample.bounds) continue;
    for (size_t i = 0; i < sample.buckets.size(); ++i) merged->buckets[i] += sample.buckets[i];
    merged->count += sample.count;
    merged->sum += sample.sum;
    merged->value = static_cast<double>(merged->count);
  }
  return merged;
}

}  // namespace chronicle::metrics
