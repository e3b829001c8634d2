#include "analysis/counter_series.hpp"

#include <fmt/format.h>

namespace chronicle::analysis {
namespace {

bool is_metric(format::SiteKind kind) {
  return kind == format::SiteKind::metric_counter || kind == format::SiteKind::metric_gauge ||
         kind == format::SiteKind::metric_histogram;
}

}  // namespace

std::optional<SeriesKind> series_kind(format::SiteKind kind) {
  switch (kind) {
    case format::SiteKind::counter:
    case format::SiteKind::metric_gauge:
      return SeriesKind::level;
    case format::SiteKind::metric_counter:
      return SeriesKind::increments;
    case format::SiteKind::metric_histogram:
      return SeriesKind::observations;
    default:
      return std::nullopt;
  }
}

std::string_view kind_name(SeriesKind kind) {
  switch (kind) {
    case SeriesKind::level:
      return "level";
    case SeriesKind::increments:
      return "counter";
    case SeriesKind::observations:
      return "histogram";
  }
  return "?";
}

const reader::Site* SeriesCatalog::site(uint32_t id) const {
  if (id == 0 || id > sites_.size() || sites_[id - 1].id == 0) return nullptr;
  return &sites_[id - 1];
}

std::optional<uint32_t> SeriesCatalog::series_of(uint32_t site_id) {
  const auto known = by_site_.find(site_id);
  if (known != by_site_.end()) return known->second;
  SeriesInfo info;
  if (const reader::Site* found = site(site_id)) {
    const std::optional<SeriesKind> kind = series_kind(found->kind);
    if (!kind) return by_site_[site_id] = std::nullopt;
    info.category = found->category;
    info.name = found->name;
    info.kind = *kind;
    // Metric names are unique without their category (always "metrics"), and read as in Prometheus.
    info.label = is_metric(found->kind) || found->category.empty() ? found->name : found->category + "/" + found->name;
  } else {
    info.name = fmt::format("#{}", site_id);
    info.label = info.name;
  }
  const auto [entry, added] =
      by_key_.try_emplace({info.kind, info.category, info.name}, static_cast<uint32_t>(series_.size()));
  if (added) series_.push_back(std::move(info));
  return by_site_[site_id] = entry->second;
}

double traced_value(const reader::Event& event, SeriesKind kind) {
  if (event.type == format::EventId::counter_float) return event.value_float;
  // Counter::add takes an unsigned amount; read it back as one, so a total never goes down.
  if (kind == SeriesKind::increments) return static_cast<double>(static_cast<uint64_t>(event.value));
  return static_cast<double>(event.value);
}

std::optional<CounterReading> CounterReader::read(const reader::Event& event) {
  if (event.type != format::EventId::counter && event.type != format::EventId::counter_float) return std::nullopt;
  const std::optional<uint32_t> series = catalog_.series_of(event.name_id);
  if (!series) return std::nullopt;
  const SeriesKind kind = catalog_.series()[*series].kind;
  CounterReading reading{*series, traced_value(event, kind), 0};
  if (kind == SeriesKind::increments) {
    if (totals_.size() <= *series) totals_.resize(*series + 1, 0.0);
    reading.value = totals_[*series] += reading.change;
  } else {
    reading.value = reading.change;
  }
  return reading;
}

void to_shown_values(SeriesKind kind, std::span<double> values) {
  if (kind != SeriesKind::increments) return;
  double total = 0;
  for (double& value : values) value = total += value;
}

}  // namespace chronicle::analysis
