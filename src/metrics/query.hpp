// Queries over metrics snapshots, shared by `chronicle top`, `metrics serve`/`query` and tests:
// pick series by name and labels, aggregate them by a set of labels (sum, avg, max, min, count),
// drill down from a total to the children that make it, rates between two snapshots, quantiles
// of histograms.
//
// Labels make the hierarchy: with series labelled pool, customer, vm, stream, the total of a
// pool is aggregate(select(s, name, {{"pool", "p1"}}), {"pool"}), and drill_down(s, name,
// {{"pool", "p1"}}, "customer") lists what each customer of that pool contributes.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/metric_names.hpp"
#include "metrics/snapshot.hpp"

namespace chronicle::metrics {

enum class Aggregation { sum, avg, max, min, count };

// "sum", "avg", "max", "min", "count"; nullopt for anything else.
std::optional<Aggregation> parse_aggregation(std::string_view text);

// One value with its labels: a metric's value, or its rate, or a group's aggregate.
struct Series {
  LabelList labels;
  double value = 0;
  size_t members = 1;  // for groups: how many series were aggregated
};

// The series of metric `name` whose labels include every pair of `where`. Counters give their
// total, gauges their value, histograms their count.
std::vector<Series> select(const MetricsSnapshot& snapshot, std::string_view name, const LabelList& where = {});

// Per-second increase of counters (and histogram counts) between two snapshots; gauges give their
// current value. Series absent from `before` count from 0.
std::vector<Series> rates(const MetricsSnapshot& before, const MetricsSnapshot& after, std::string_view name,
                          const LabelList& where = {});

// The rate of each sample of `after` (in its order), as rates() gives it: linear in the samples,
// however many share one (name, labels) (a crafted mapping may repeat one).
std::vector<double> sample_rates(const MetricsSnapshot& before, const MetricsSnapshot& after);

// Groups by the values of the labels `by` (a series without one of them groups under ""),
// ordered by those values. An empty `by` gives one group: the total.
std::vector<Series> aggregate(std::span<const Series> series, const std::vector<std::string>& by, Aggregation how);

// The children of `path` along `child_label`: aggregate(select(snapshot, name, path), path's
// labels + child_label).
std::vector<Series> drill_down(const MetricsSnapshot& snapshot, std::string_view name, const LabelList& path,
                               const std::string& child_label, Aggregation how = Aggregation::sum);

// The q-quantile (0..1) of a histogram, interpolating linearly inside the bucket that holds it,
// as Prometheus's histogram_quantile does. NaN when it holds no observation.
double quantile(const MetricSample& histogram, double q);

// The histograms of `name` matching `where`, merged bucket by bucket (same bounds required;
// others are skipped). nullopt when there is none.
std::optional<MetricSample> merge_histograms(const MetricsSnapshot& snapshot, std::string_view name,
                                             const LabelList& where = {});

}  // namespace chronicle::metrics
