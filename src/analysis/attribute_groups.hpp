// Spans grouped by the value of one of their attributes (`chronicle stats --group-by KEY`):
// counts, failures and latency percentiles per span name and value, e.g. latency per customer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

struct AttributeGroup {
  std::string category;
  std::string name;   // the span's
  std::string value;  // the attribute's, as text (reader::attribute_text)
  uint64_t count = 0;
  uint64_t failed = 0;  // spans whose status is error
  uint64_t p50_ns = 0;  // begin to end (suspension included, as stats' WALL)
  uint64_t p99_ns = 0;  // the nearest rank
  uint64_t max_ns = 0;
  uint64_t total_ns = 0;
};

struct AttributeGroups {
  std::vector<AttributeGroup> groups;  // by span name, then by total time, largest first
  uint64_t spans_with_key = 0;
  uint64_t spans_without_key = 0;  // of the names that have it at least once
};

// The spans that carry `key` (its last value when set more than once), ended or not.
AttributeGroups group_spans_by_attribute(const reader::Trace& trace, std::string_view key);

}  // namespace chronicle::analysis
