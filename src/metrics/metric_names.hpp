// Metric and label names: what is valid, and how labels are stored in the metrics mapping.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chronicle::metrics {

using LabelList = std::vector<std::pair<std::string, std::string>>;

// [A-Za-z_:][A-Za-z0-9_:.]*  (Prometheus names, plus '.' which exposition turns into '_').
bool valid_metric_name(std::string_view name);
// [A-Za-z_][A-Za-z0-9_]*
bool valid_label_name(std::string_view name);

// The registry's rule for a series, applied by readers of a mapping too (a name or label the
// registry refuses would be raw text in exposition): why metric `name`, or its `labels` (sorted
// by key), cannot be registered; "" when they can.
std::string metric_name_problem(std::string_view name);
std::string labels_problem(std::string_view name, const LabelList& sorted_labels);

// key US value RS ..., the form MetricEntry::labels holds (see metrics_layout.hpp).
std::string encode_labels(const LabelList& labels);
LabelList decode_labels(std::string_view encoded);

// How a series reads to people and in exposition: name{label="value",...}.
std::string series_name(std::string_view name, const LabelList& labels);

}  // namespace chronicle::metrics
