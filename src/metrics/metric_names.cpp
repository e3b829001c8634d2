#include "metrics/metric_names.hpp"

#include <fmt/format.h>

#include <iterator>

#include <algorithm>

#include "chronicle/detail/metrics_layout.hpp"

namespace chronicle::metrics {
namespace {

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

bool valid_metric_name(std::string_view name) {
  if (name.empty() || !(is_letter(name[0]) || name[0] == ':')) return false;
  for (char c : name)
    if (!(is_letter(c) || is_digit(c) || c == ':' || c == '.')) return false;
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || !is_letter(name[0])) return false;
  for (char c : name)
    if (!(is_letter(c) || is_digit(c))) return false;
  return true;
}

std::string metric_name_problem(std::string_view name) {
  if (valid_metric_name(name)) return {};
  return fmt::format("metric name \"{}\": use [A-Za-z_:][A-Za-z0-9_:.]*", name);
}

std::string labels_problem(std::string_view name, const LabelList& sorted_labels) {
  for (size_t i = 0; i < sorted_labels.size(); ++i) {
    const auto& [key, value] = sorted_labels[i];
    if (!valid_label_name(key))
      return fmt::format("label name \"{}\" of metric {}: use [A-Za-z_][A-Za-z0-9_]*", key, name);
    if (value.find_first_of("\x1e\x1f") != std::string::npos)
      return fmt::format("label {} of metric {}: control characters", key, name);
    if (i > 0 && key == sorted_labels[i - 1].first) return fmt::format("label {} of metric {} given twice", key, name);
  }
  return {};
}

std::string encode_labels(const LabelList& labels) {
  std::string out;
  for (const auto& [key, value] : labels) {
    out += key;
    out += format::kLabelKeyEnd;
    out += value;
    out += format::kLabelEnd;
  }
  return out;
}

LabelList decode_labels(std::string_view encoded) {
  LabelList labels;
  while (!encoded.empty()) {
    const size_t key_end = encoded.find(format::kLabelKeyEnd);
    if (key_end == std::string_view::npos) break;
    size_t value_end = encoded.find(format::kLabelEnd, key_end + 1);
    if (value_end == std::string_view::npos) value_end = encoded.size();
    labels.emplace_back(std::string(encoded.substr(0, key_end)),
                        std::string(encoded.substr(key_end + 1, value_end - key_end - 1)));
    encoded.remove_prefix(std::min(value_end + 1, encoded.size()));
  }
  return labels;
}

std::string series_name(std::string_view name, const LabelList& labels) {
  std::string text(name);
  if (labels.empty()) return text;
  text += '{';
  for (size_t i = 0; i < labels.size(); ++i)
    fmt::format_to(std::back_inserter(text), "{}{}=\"{}\"", i ? "," : "", labels[i].first, labels[i].second);
  text += '}';
  return text;
}

}  // namespace chronicle::metrics
