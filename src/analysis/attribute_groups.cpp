#include "analysis/attribute_groups.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace chronicle::analysis {
namespace {

const reader::SpanAttribute* find_attribute(const reader::PairedSpan& span, std::string_view key) {
  for (size_t i = span.attributes.size(); i-- > 0;)
    if (span.attributes[i].key == key) return &span.attributes[i];
  return nullptr;
}

uint64_t nearest_rank(const std::vector<uint64_t>& sorted, double quantile) {
  const size_t rank = static_cast<size_t>(quantile * static_cast<double>(sorted.size()) + 0.999999);
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

AttributeGroups group_spans_by_attribute(const reader::Trace& trace, std::string_view key) {
  struct Values {
    std::vector<uint64_t> durations;
    uint64_t failed = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Values> by_group;
  std::map<uint32_t, uint64_t> without_key;  // by site: spans of names that may have it
  std::set<uint32_t> sites_with_key;
  AttributeGroups result;
  auto take = [&](const reader::PairedSpan& span) {
    if (span.role != reader::SpanRole::span) return;
    const reader::SpanAttribute* attribute = find_attribute(span, key);
    if (!attribute) {
      ++without_key[span.site_id];
      return;
    }
    sites_with_key.insert(span.site_id);
    const reader::Site* site = trace.site(span.site_id);
    Values& values =
        by_group[{site ? site->category : "?", site ? site->name : "?", reader::attribute_text(*attribute)}];
    values.durations.push_back(static_cast<uint64_t>(trace.to_unix_ns(span.end) - trace.to_unix_ns(span.begin)));
    values.failed += span.failed;
    ++result.spans_with_key;
  };
  reader::SpanPairing pairing(trace);
  uint64_t last = 0;
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    last = std::max(last, event.ticks);
    if (event.type == format::EventId::span_end && event.span) take(*event.span);
    return true;
  });
  for (const reader::PairedSpan& span : pairing.close_all(last)) take(span);
  for (const auto& [site, count] : without_key)
    if (sites_with_key.count(site)) result.spans_without_key += count;
  for (auto& [group, values] : by_group) {
    std::sort(values.durations.begin(), values.durations.end());
    AttributeGroup& out = result.groups.emplace_back();
    std::tie(out.category, out.name, out.value) = group;
    out.count = values.durations.size();
    out.failed = values.failed;
    out.p50_ns = nearest_rank(values.durations, 0.5);
    out.p99_ns = nearest_rank(values.durations, 0.99);
    out.max_ns = values.durations.back();
    for (const uint64_t ns : values.durations) out.total_ns += ns;
  }
  std::stable_sort(result.groups.begin(), result.groups.end(), [](const AttributeGroup& a, const AttributeGroup& b) {
    return std::tie(a.category, a.name) != std::tie(b.category, b.name)
               ? std::tie(a.category, a.name) < std::tie(b.category, b.name)
               : a.total_ns > b.total_ns;
  });
  return result;
}

}  // namespace chronicle::analysis
