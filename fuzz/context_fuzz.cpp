// The input is a traceparent header, then (after the first newline, if any) a tracestate. parse()
// never crashes; what it accepts is a valid context that writes back the header it was read from
// (version 00, without the surrounding whitespace), reads back to itself, and carries a
// tracestate that passes the check again unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "chronicle/context.hpp"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

std::string_view without_whitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

void check_accepted(std::string_view traceparent, const chronicle::TraceContextParseResult& result) {
  const chronicle::TraceContext& context = *result.context;
  require(result.error.empty() && context.valid());
  const std::string written = context.traceparent();
  require(written.size() == 55);
  const std::string_view given = without_whitespace(traceparent);
  if (given.substr(0, 2) == "00") require(written == given);
  auto reread = chronicle::TraceContext::parse(written);
  require(reread && reread->trace_id == context.trace_id && reread->span_id == context.span_id &&
          reread->flags == context.flags);
  std::string why;
  const auto again = chronicle::checked_tracestate(context.tracestate, why);
  require(again && *again == context.tracestate && why.empty());
  require(context.tracestate.size() <= 512);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view traceparent = input.substr(0, newline);
  const std::string_view tracestate =
      newline == std::string_view::npos ? std::string_view{} : input.substr(newline + 1);
  const auto result = chronicle::TraceContext::parse_with_reason(traceparent, tracestate);
  if (result.context) {
    check_accepted(traceparent, result);
  } else {
    require(!result.error.empty() && result.tracestate_note.empty());
  }
  return 0;
}
