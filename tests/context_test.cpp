// W3C Trace Context: the traceparent and tracestate vectors the specification's text gives or
// implies, round trips, and ids (unique across threads, never zero, re-salted in a fork child).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chronicle/context.hpp"

namespace {

using chronicle::TraceContext;

// The example of "Examples of HTTP traceparent Headers".
constexpr std::string_view kTraceId = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view kSpanId = "00f067aa0ba902b7";

std::string header(std::string_view version, std::string_view trace_id, std::string_view span_id,
                   std::string_view flags) {
  return std::string(version) + "-" + std::string(trace_id) + "-" + std::string(span_id) + "-" + std::string(flags);
}

// The reason a traceparent is rejected with, after checking it gives no context.
std::string rejection(std::string_view traceparent) {
  const TraceContext::ParseResult result = TraceContext::parse_with_reason(traceparent);
  EXPECT_FALSE(result.context) << traceparent << " was accepted";
  EXPECT_FALSE(TraceContext::parse(traceparent)) << traceparent;
  return std::string(result.error);
}

TEST(TraceParent, SpecificationExamplesAreRead) {
  const auto sampled = TraceContext::parse(header("00", kTraceId, kSpanId, "01"));
  ASSERT_TRUE(sampled);
  EXPECT_EQ(sampled->trace_id_hex(), kTraceId);
  EXPECT_EQ(sampled->span_id_hex(), kSpanId);
  EXPECT_EQ(sampled->trace_id[0], 0x4b);
  EXPECT_EQ(sampled->span_id[7], 0xb7);
  EXPECT_TRUE(sampled->sampled());
  EXPECT_TRUE(sampled->valid());
  EXPECT_EQ(sampled->traceparent(), header("00", kTraceId, kSpanId, "01"));

  const auto unsampled = TraceContext::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  ASSERT_TRUE(unsampled);
  EXPECT_FALSE(unsampled->sampled());
  EXPECT_EQ(unsampled->traceparent(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
}

TEST(TraceParent, FlagsAreABitFieldAndUnknownBitsAreKeptWhenRead) {
  // "trace-flags": 09 is sampled (00001001), 08 is not; bits other than sampled are undefined.
  const auto nine = TraceContext::parse(header("00", kTraceId, kSpanId, "09"));
  ASSERT_TRUE(nine);
  EXPECT_TRUE(nine->sampled());
  EXPECT_EQ(nine->flags, 0x09);
  EXPECT_EQ(nine->traceparent(), header("00", kTraceId, kSpanId, "09"));
  const auto eight = TraceContext::parse(header("00", kTraceId, kSpanId, "08"));
  ASSERT_TRUE(eight);
  EXPECT_FALSE(eight->sampled());
  // "Other Flags": what this process sends has them cleared.
  EXPECT_EQ(nine->child().flags, 0x01);
  EXPECT_EQ(eight->child().flags, 0x00);
}

TEST(TraceParent, WhitespaceAroundTheFieldValueIsNotPartOfIt) {
  const std::string value = header("00", kTraceId, kSpanId, "01");
  for (const std::string& padded : {" " + value, value + " ", "\t " + value + " \t"}) {
    const auto context = TraceContext::parse(padded);
    ASSERT_TRUE(context) << "'" << padded << "'";
    EXPECT_EQ(context->traceparent(), value);
  }
  EXPECT_EQ(rejection("00-" + std::string(kTraceId) + " -" + std::string(kSpanId) + "-01"),
            "trace-id is not 32 characters followed by '-'");
  EXPECT_EQ(rejection("\n" + value), "version is not 2 lowercase hex digits");
  EXPECT_EQ(rejection(value + "\n"), "version 00 has more than 55 characters");
}

TEST(TraceParent, MalformedHeadersAreRejectedWithTheirReason) {
  const std::string trace_id(kTraceId), span_id(kSpanId);
  EXPECT_EQ(rejection(""), "no version");
  EXPECT_EQ(rejection("0"), "no version");
  EXPECT_EQ(rejection("0A-" + trace_id + "-" + span_id + "-01"), "version is not 2 lowercase hex digits");
  EXPECT_EQ(rejection("ff-" + trace_id + "-" + span_id + "-01"), "version ff is invalid");
  EXPECT_EQ(rejection("00"), "shorter than the 55 characters of the version-format");
  EXPECT_EQ(rejection("00_" + trace_id + "-" + span_id + "-01"), "no '-' after the version");
  EXPECT_EQ(rejection(header("00", trace_id.substr(1), span_id, "01") + "0"),
            "trace-id is not 32 characters followed by '-'");
  EXPECT_EQ(rejection(header("00", trace_id + "0", span_id.substr(1), "01")),
            "trace-id is not 32 characters followed by '-'");
  EXPECT_EQ(rejection(header("00", trace_id, span_id.substr(1), "01") + "0"),
            "parent-id is not 16 characters followed by '-'");
  EXPECT_EQ(rejection(header("00", trace_id, span_id + "0", "1")), "parent-id is not 16 characters followed by '-'");
  EXPECT_EQ(rejection(header("00", trace_id, span_id, "1")), "shorter than the 55 characters of the version-format");
  EXPECT_EQ(rejection(header("00", trace_id, span_id, "001")), "version 00 has more than 55 characters");
  EXPECT_EQ(rejection("00-" + trace_id + "_" + span_id + "-01"), "trace-id is not 32 characters followed by '-'");
  EXPECT_EQ(rejection("00-" + trace_id + "-" + span_id + "_01"), "parent-id is not 16 characters followed by '-'");
  EXPECT_EQ(rejection(header("00", "4BF92F3577B34DA6A3CE929D0E0E4736", span_id, "01")),
            "trace-id is not lowercase hex");
  EXPECT_EQ(rejection(header("00", "4bf92f3577b34da6a3ce929d0e0e473g", span_id, "01")),
            "trace-id is not lowercase hex");
  EXPECT_EQ(rejection(header("00", trace_id, "00F067AA0BA902B7", "01")), "parent-id is not lowercase hex");
  EXPECT_EQ(rejection(header("00", trace_id, "00f067aa0ba902bz", "01")), "parent-id is not lowercase hex");
  EXPECT_EQ(rejection(header("00", trace_id, span_id, "0A")), "trace-flags are not lowercase hex");
  EXPECT_EQ(rejection(header("00", trace_id, span_id, "-1")), "trace-flags are not lowercase hex");
  EXPECT_EQ(rejection(header("00", std::string(32, '0'), span_id, "01")), "trace-id is all zeros");
  EXPECT_EQ(rejection(header("00", trace_id, std::string(16, '0'), "01")), "parent-id is all zeros");
  // "Versioning of traceparent": version 00 has exactly the four fields.
  EXPECT_EQ(rejection(header("00", trace_id, span_id, "01") + "-what-the-future-will-be-like"),
            "version 00 has more than 55 characters");
}

TEST(TraceParent, HigherVersionsAreReadAsFarAsVersion00Goes) {
  const std::string known = header("00", kTraceId, kSpanId, "01");
  for (std::string_view version : {"01", "cc", "fe"}) {
    for (std::string_view rest : {"", "-", "-what-the-future-will-be-like", "-0123-abc"}) {
      const std::string value = header(version, kTraceId, kSpanId, "01") + std::string(rest);
      const auto context = TraceContext::parse(value);
      ASSERT_TRUE(context) << value;
      // "Mutating the traceparent Field": written back in the highest version known, 00.
      EXPECT_EQ(context->traceparent(), known) << value;
    }
    const std::string fields = header(version, kTraceId, kSpanId, "01");
    EXPECT_EQ(rejection(fields + ".what-the-future-will-be-like"),
              "trace-flags are not 2 characters followed by '-' or the end");
    EXPECT_EQ(rejection(fields + "0-extra"), "trace-flags are not 2 characters followed by '-' or the end");
    EXPECT_EQ(rejection(fields.substr(0, 54)), "shorter than the 55 characters of the version-format");
    EXPECT_EQ(rejection(header(version, std::string(32, '0'), kSpanId, "01") + "-x"), "trace-id is all zeros");
    EXPECT_EQ(rejection(header(version, kTraceId, "00F067AA0BA902B7", "01") + "-x"), "parent-id is not lowercase hex");
  }
}

TEST(TraceParent, RoundTrips) {
  for (int i = 0; i < 100; ++i) {
    TraceContext made = TraceContext::new_trace(i % 2 == 0);
    made.flags |= static_cast<uint8_t>(i & 0xfe);
    const auto read = TraceContext::parse(made.traceparent());
    ASSERT_TRUE(read) << made.traceparent();
    EXPECT_EQ(*read, made);
    EXPECT_EQ(read->traceparent(), made.traceparent());
    EXPECT_EQ(read->traceparent().size(), 55u);
  }
}

std::string tracestate_note(std::string_view tracestate) {
  const auto result = TraceContext::parse_with_reason(header("00", kTraceId, kSpanId, "01"), tracestate);
  EXPECT_TRUE(result.context) << "a tracestate must never reject the traceparent";
  if (result.context && !result.tracestate_note.empty()) {
    EXPECT_EQ(result.context->tracestate, "");
  }
  return result.tracestate_note;
}

std::string kept_tracestate(std::string_view tracestate) {
  const auto result = TraceContext::parse_with_reason(header("00", kTraceId, kSpanId, "01"), tracestate);
  EXPECT_TRUE(result.context);
  EXPECT_EQ(result.tracestate_note, "") << tracestate;
  return result.context ? result.context->tracestate : "<no context>";
}

TEST(TraceState, ValidListsAreCarriedVerbatim) {
  EXPECT_EQ(kept_tracestate(""), "");
  EXPECT_EQ(kept_tracestate("congo=t61rcWkgMzE"), "congo=t61rcWkgMzE");
  EXPECT_EQ(kept_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"), "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  // Empty and whitespace-only members, whitespace around members, a value's leading spaces.
  EXPECT_EQ(kept_tracestate(" rojo=1 ,\t, ,congo= x y"), "rojo=1 ,\t, ,congo= x y");
  EXPECT_EQ(kept_tracestate(" , "), "");
  EXPECT_EQ(kept_tracestate("fw529a3039@dt=abc,1a-2f@ada=x,a_b-c*d/e=!~"),
            "fw529a3039@dt=abc,1a-2f@ada=x,a_b-c*d/e=!~");
  EXPECT_EQ(kept_tracestate("k=" + std::string(256, 'v')), "k=" + std::string(256, 'v'));
  EXPECT_EQ(kept_tracestate(std::string(256, 'k') + "=v"), std::string(256, 'k') + "=v");
  std::string thirty_two;
  for (int i = 0; i < 32; ++i) thirty_two += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_EQ(kept_tracestate(thirty_two), thirty_two);
}

TEST(TraceState, InvalidListsAreDroppedWithTheirReason) {
  EXPECT_EQ(tracestate_note("rojo"), "a list-member has no '='");
  EXPECT_EQ(tracestate_note("rojo=1,congo"), "a list-member has no '='");
  EXPECT_EQ(tracestate_note("Rojo=1"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note("=1"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note("1rojo=1"), "a key breaks the key grammar");  // simple keys begin with a-z
  EXPECT_EQ(tracestate_note("ro jo=1"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note("a@1b=1"), "a key breaks the key grammar");  // system-id begins with a-z
  EXPECT_EQ(tracestate_note("a@b@c=1"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note(std::string(257, 'k') + "=v"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note(std::string(242, 't') + "@s=v"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note("t@" + std::string(15, 's') + "=v"), "a key breaks the key grammar");
  EXPECT_EQ(tracestate_note("rojo="), "a value breaks the value grammar");
  EXPECT_EQ(tracestate_note("rojo=a=b"), "a value breaks the value grammar");
  EXPECT_EQ(tracestate_note("rojo=a\tb"), "a value breaks the value grammar");
  EXPECT_EQ(tracestate_note("rojo=caf\xc3\xa9"), "a value breaks the value grammar");
  EXPECT_EQ(tracestate_note("k=" + std::string(257, 'v')), "a value breaks the value grammar");
  EXPECT_EQ(tracestate_note("rojo=1,congo=2,rojo=3"), "a key appears twice");
  std::string thirty_three;
  for (int i = 0; i < 33; ++i) thirty_three += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_EQ(tracestate_note(thirty_three), "more than 32 list-members");
}

TEST(TraceState, IsNotReadWhenTheTraceparentIsRejected) {
  const auto result = TraceContext::parse_with_reason(header("ff", kTraceId, kSpanId, "01"), "not a list");
  EXPECT_FALSE(result.context);
  EXPECT_EQ(result.error, "version ff is invalid");
  EXPECT_EQ(result.tracestate_note, "");
}

TEST(TraceState, LongListsLoseWholeEntriesLongOnesFirstThenFromTheEnd) {
  // "tracestate Limits": 4 entries of 100 characters and one of 200: 604 characters.
  const std::string a = "a=" + std::string(98, 'x'), b = "b=" + std::string(98, 'x');
  const std::string c = "c=" + std::string(98, 'x'), d = "d=" + std::string(98, 'x');
  const std::string long_one = "l=" + std::string(198, 'x');
  const auto fitted = TraceContext::parse_with_reason(header("00", kTraceId, kSpanId, "01"),
                                                      a + "," + long_one + "," + b + "," + c + "," + d);
  ASSERT_TRUE(fitted.context);
  EXPECT_EQ(fitted.context->tracestate, a + "," + b + "," + c + "," + d);
  EXPECT_EQ(fitted.tracestate_note, "longer than 512 characters: 1 entries left out");
  // Six short entries: 605 characters, the last one goes.
  const std::string e = "e=" + std::string(98, 'x'), f = "f=" + std::string(98, 'x');
  const auto shortened = TraceContext::parse_with_reason(header("00", kTraceId, kSpanId, "01"),
                                                         a + "," + b + "," + c + "," + d + "," + e + "," + f);
  ASSERT_TRUE(shortened.context);
  EXPECT_EQ(shortened.context->tracestate, a + "," + b + "," + c + "," + d + "," + e);
  EXPECT_EQ(shortened.context->tracestate.size(), 504u);
}

TEST(TraceContextIds, ChildKeepsTheTraceAndTracestateWithANewSpan) {
  auto parent = TraceContext::parse(header("00", kTraceId, kSpanId, "01"), "congo=t61rcWkgMzE");
  ASSERT_TRUE(parent);
  const TraceContext child = parent->child();
  EXPECT_EQ(child.trace_id, parent->trace_id);
  EXPECT_NE(child.span_id, parent->span_id);
  EXPECT_EQ(child.tracestate, "congo=t61rcWkgMzE");
  EXPECT_TRUE(child.valid());
  EXPECT_FALSE(TraceContext::new_trace(false).sampled());
  EXPECT_TRUE(TraceContext::new_trace().sampled());
}

TEST(TraceContextIds, UniqueAcrossThreadsAndNeverZero) {
  constexpr int kThreads = 4;
  constexpr int kSpansPerThread = 250'000;
  constexpr int kTracesPerThread = 50'000;
  std::vector<std::vector<uint64_t>> spans(kThreads);
  std::vector<std::vector<std::string>> traces(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const TraceContext root = TraceContext::new_trace();
      for (int i = 0; i < kSpansPerThread; ++i) {
        uint64_t id = 0;
        for (uint8_t byte : root.child().span_id) id = id << 8 | byte;
        spans[t].push_back(id);
      }
      for (int i = 0; i < kTracesPerThread; ++i) {
        const TraceContext trace = TraceContext::new_trace();
        ASSERT_TRUE(trace.valid());
        traces[t].push_back(trace.trace_id_hex());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<uint64_t> all_spans;
  std::vector<std::string> all_traces;
  for (int t = 0; t < kThreads; ++t) {
    all_spans.insert(all_spans.end(), spans[t].begin(), spans[t].end());
    all_traces.insert(all_traces.end(), traces[t].begin(), traces[t].end());
  }
  ASSERT_EQ(all_spans.size(), size_t{kThreads} * kSpansPerThread);
  EXPECT_EQ(std::count(all_spans.begin(), all_spans.end(), 0u), 0);
  std::sort(all_spans.begin(), all_spans.end());
  EXPECT_EQ(std::adjacent_find(all_spans.begin(), all_spans.end()), all_spans.end()) << "a span id repeats";
  std::sort(all_traces.begin(), all_traces.end());
  EXPECT_EQ(std::adjacent_find(all_traces.begin(), all_traces.end()), all_traces.end()) << "a trace id repeats";
}

// A fork child starts with the parent's counters; without new keys its ids would be the parent's.
TEST(TraceContextIds, ForkChildMakesOtherIdsThanItsParent) {
  (void)TraceContext::new_trace();  // the keys exist before the fork
  int pipe_ends[2];
  ASSERT_EQ(pipe(pipe_ends), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string made = TraceContext::new_trace().traceparent();
    const bool written = write(pipe_ends[1], made.data(), made.size()) == static_cast<ssize_t>(made.size());
    _exit(written ? 0 : 1);
  }
  close(pipe_ends[1]);
  const std::string in_parent = TraceContext::new_trace().traceparent();
  std::string in_child(55, '\0');
  size_t got = 0;
  while (got < in_child.size()) {
    const ssize_t n = read(pipe_ends[0], in_child.data() + got, in_child.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(pipe_ends[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, 55u);
  const auto parent_context = TraceContext::parse(in_parent), child_context = TraceContext::parse(in_child);
  ASSERT_TRUE(parent_context && child_context) << in_child;
  EXPECT_NE(parent_context->trace_id, child_context->trace_id);
  EXPECT_NE(parent_context->span_id, child_context->span_id);
}

}  // namespace
