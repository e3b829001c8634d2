#include "metrics/exposition.hpp"

#include <fmt/format.h>
#include <cmath>
#include <map>
#include <vector>

namespace chronicle::metrics {
namespace {

using format::MetricKind;

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

// OpenMetrics wants bucket bounds as canonical floats ("1.0", not "1").
std::string bound_text(double bound) {
  std::string text = number(bound);
  if (text.find_first_of(".eIN") == std::string::npos) text += ".0";
  return text;
}

void append_escaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

std::string label_text(const LabelList& labels, std::string_view extra_key = {}, std::string_view extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return {};
  std::string out = "{";
  bool first = true;
  auto add = [&](std::string_view key, std::string_view value) {
    if (!first) out += ',';
    first = false;
    out += key;
    out += "=\"";
    append_escaped(out, value);
    out += '"';
  };
  for (const auto& [key, value] : labels) add(key, value);
  if (!extra_key.empty()) add(extra_key, extra_value);
  out += '}';
  return out;
}

std::string_view type_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::counter:
      return "counter";
    case MetricKind::gauge:
      return "gauge";
    case MetricKind::histogram:
      return "histogram";
  }
  return "unknown";
}

std::string family_name(const MetricSample& sample) {
  std::string name = exposition_name(sample.name);
  if (sample.kind == MetricKind::counter && name.size() > 6 && name.ends_with("_total")) name.resize(name.size() - 6);
  return name;
}

}  // namespace

std::string exposition_name(std::string_view name) {
  std::string out(name);
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) out[i] = '_';
  }
  return out;
}

TextFormat negotiate_format(std::string_view accept_header) {
  return accept_header.find("application/openmetrics-text") != std::string_view::npos ? TextFormat::openmetrics
                                                                                      : TextFormat::prometheus;
}

std::string_view content_type(TextFormat format) {
  return format == TextFormat::openmetrics ? kOpenMetricsContentType : kPrometheusTextContentType;
}

std::string expose(const MetricsSnapshot& snapshot, TextFormat format) {
  // Families in the order their first series was registered.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const MetricSample*>> families;
  for (const MetricSample& sample : snapshot.metrics) {
    const std::string family = family_name(sample);
    auto [found, fresh] = families.try_emplace(family);
    if (fresh) order.push_back(family);
    // Two metrics whose names differ only in characters exposition replaces cannot share a
    // family with different types; the first one wins.
    if (!found->second.empty() && found->second.front()->kind != sample.kind) continue;
    found->second.push_back(&sample);
  }
  std::string out;
  for (const std::string& family : order) {
    const auto& members = families[family];
    const MetricKind kind = members.front()->kind;
    const std::string counter_name = format == TextFormat::openmetrics ? family : family + "_total";
    const std::string& declared = kind == MetricKind::counter ? counter_name : family;
    // Help text is the name as the program spelled it, which exposition may have changed.
    fmt::format_to(std::back_inserter(out), "# HELP {} chronicle {} {}\n", declared, type_name(kind),
                   members.front()->name);
    fmt::format_to(std::back_inserter(out), "# TYPE {} {}\n", declared, type_name(kind));
    for (const MetricSample* sample : members) {
      switch (kind) {
        case MetricKind::counter:
          fmt::format_to(std::back_inserter(out), "{}_total{} {}\n", family, label_text(sample->labels), sample->count);
          break;
        case MetricKind::gauge:
          fmt::format_to(std::back_inserter(out), "{}{} {}\n", family, label_text(sample->labels),
                         number(sample->value));
          break;
        case MetricKind::histogram: {
          uint64_t cumulative = 0;
          for (size_t bucket = 0; bucket < sample->buckets.size(); ++bucket) {
            cumulative += sample->buckets[bucket];
            const std::string le = bucket < sample->bounds.size() ? bound_text(sample->bounds[bucket]) : "+Inf";
            fmt::format_to(std::back_inserter(out), "{}_bucket{} {}\n", family, label_text(sample->labels, "le", le),
                           cumulative);
          }
          fmt::format_to(std::back_inserter(out), "{}_sum{} {}\n", family, label_text(sample->labels),
                         number(sample->sum));
          fmt::format_to(std::back_inserter(out), "{}_count{} {}\n", family, label_text(sample->labels), cumulative);
          break;
        }
      }
    }
  }
  // Metrics the program created after the registry was full: their updates went nowhere. Shown
  // only once it happens, so that a healthy process's exposition is its own metrics alone.
  if (snapshot.dropped > 0) {
    const std::string family = "chronicle_metrics_dropped";
    const std::string declared = format == TextFormat::openmetrics ? family : family + "_total";
    fmt::format_to(std::back_inserter(out),
                   "# HELP {} chronicle metrics that could not be registered (the registry was full); their "
                   "updates are lost\n",
                   declared);
    fmt::format_to(std::back_inserter(out), "# TYPE {} counter\n", declared);
    fmt::format_to(std::back_inserter(out), "{}_total {}\n", family, snapshot.dropped);
  }
  if (format == TextFormat::openmetrics) out += "# EOF\n";
  return out;
}

}  // namespace chronicle::metrics
