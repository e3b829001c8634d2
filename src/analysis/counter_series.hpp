// Counter series as every reader shows them (stats, dump, the viewer, the exporters), decided in
// this one place.
//
// A series is a category and a name: for metric sites the name carries the labels
// (`requests{route="/a"}`, src/metrics/metric_names.cpp). Every call site with that category and
// name, on every thread, feeds the one series; the thread is an attribute of each sample, not
// part of what the series is. Sites of different kinds stay apart even under one name, since
// their values mean different things.
//
// Metric counters trace increments: each thread adds to its own shard of the metric, so the
// writer does not cheaply know the total. Readers add the increments up here, in time order,
// into a running total that starts at 0 at the trace's first event: a flight-recorder snapshot
// shows the growth within its window, not the count since the process started (that is what
// `chronicle metrics` and `top` read from the metrics mapping).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

// How a series' event values read.
enum class SeriesKind {
  level,         // each value is the new level: CHRONICLE_COUNTER, metric gauges
  increments,    // each value is added to a total: metric counters
  observations,  // each value is one observation: metric histograms
};

std::string_view kind_name(SeriesKind kind);  // "level", "counter", "histogram"

// The kind of series a site's counter events feed; nullopt for sites that are not counters'.
std::optional<SeriesKind> series_kind(format::SiteKind kind);

struct SeriesInfo {
  std::string category;
  std::string name;
  std::string label;  // how it reads: "category/name"; a metric's name with its labels
  SeriesKind kind = SeriesKind::level;
};

// Series by site id, found once per site.
class SeriesCatalog {
 public:
  explicit SeriesCatalog(const std::vector<reader::Site>& sites) : sites_(sites) {}

  // The series a counter event of `site_id` feeds, numbered in order of first use; nullopt when
  // the site is not a counter's. An id without a definition (a damaged trace) is a level series
  // of its own, "#id".
  std::optional<uint32_t> series_of(uint32_t site_id);
  const std::vector<SeriesInfo>& series() const { return series_; }

 private:
  const reader::Site* site(uint32_t id) const;

  const std::vector<reader::Site>& sites_;
  std::vector<SeriesInfo> series_;
  std::map<std::tuple<SeriesKind, std::string, std::string>, uint32_t> by_key_;
  std::unordered_map<uint32_t, std::optional<uint32_t>> by_site_;
};

// The value a counter event carries, as traced. Metric counter increments are unsigned.
double traced_value(const reader::Event& event, SeriesKind kind);

struct CounterReading {
  uint32_t series = 0;  // index into CounterReader::series()
  double change = 0;    // as traced: a level, an increment or an observation
  double value = 0;     // as shown: the level, the running total, or the observation
};

// Counter events of a trace in time order (Trace::for_each_event) to what readers show.
class CounterReader {
 public:
  explicit CounterReader(const reader::Trace& trace) : catalog_(trace.sites()) {}

  // nullopt for events that are not counter events of a counter site.
  std::optional<CounterReading> read(const reader::Event& event);
  const std::vector<SeriesInfo>& series() const { return catalog_.series(); }

 private:
  SeriesCatalog catalog_;
  std::vector<double> totals_;  // by series
};

// For readers that collect a series' samples stream by stream (the viewer): once the samples
// are in time order, turns their traced values into shown ones (increments into running totals).
void to_shown_values(SeriesKind kind, std::span<double> values);

}  // namespace chronicle::analysis
