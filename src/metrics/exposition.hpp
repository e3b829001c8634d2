// Metrics as text for Prometheus: the OpenMetrics 1.0 format, and the older Prometheus text
// format 0.0.4 for scrapers that do not ask for OpenMetrics.
#pragma once

#include <string>
#include <string_view>

#include "metrics/snapshot.hpp"

namespace chronicle::metrics {

inline constexpr std::string_view kOpenMetricsContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
inline constexpr std::string_view kPrometheusTextContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class TextFormat { openmetrics, prometheus };

// The format a scraper asked for in its Accept header.
TextFormat negotiate_format(std::string_view accept_header);

std::string_view content_type(TextFormat format);

// Names: '.' and other characters Prometheus refuses become '_'. Series of one name are grouped
// into one family (a family's samples must be contiguous); a counter's family drops a trailing
// "_total" and its samples carry it. Histograms give _bucket (cumulative, le="+Inf" last),
// _sum and _count.
std::string expose(const MetricsSnapshot& snapshot, TextFormat format);

std::string exposition_name(std::string_view name);

}  // namespace chronicle::metrics
