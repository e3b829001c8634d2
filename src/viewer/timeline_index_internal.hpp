// Private to the timeline index's files (src/viewer/timeline_*.cpp): what more than one of them
// needs and the public header does not say.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader/trace_reader.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle::viewer::index_internal {

std::string process_group(const reader::Trace& trace);

// IndexBuilder's steps that IndexCombiner runs again on the combined index.
void lay_out_tasks(TimelineIndex& index);
void sort_arrows(TimelineIndex& index);
void finish_whole_spans(TimelineIndex& index);
// Lane::busy and busy_is_outermost, from the lane's outermost spans and task runs.
void index_busy_row(Lane& lane);

// What details show and search looks in: "key = value", as dump prints an attribute.
std::string attribute_text_of(const reader::SpanAttribute& attribute);
// The tasks' own attributes (SpanPairing::task_attributes) as texts, by task id.
using TaskAttributeTexts = std::unordered_map<uint64_t, std::vector<std::string>>;
TaskAttributeTexts task_attribute_texts_of(const reader::SpanPairing& pairing);
// Span k's attributes and error status as texts (WholeSpans::attribute_texts).
void add_attribute_texts(WholeSpans& whole, uint32_t k, const reader::PairedSpan& span);

}  // namespace chronicle::viewer::index_internal
