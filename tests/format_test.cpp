#include <gtest/gtest.h>

#include "format/category_rules.hpp"
#include "format/event_header.hpp"
#include "format/metadata.hpp"
#include "settings/settings.hpp"

namespace chronicle {
namespace {

TEST(Metadata, ReadsBackWhatItWrites) {
  format::TraceDescription trace;
  for (uint8_t i = 0; i < 16; ++i) trace.uuid[i] = i * 17;
  trace.clock = {2'999'912'345, 123'456'789'000, 1'000'000'000, 1'700'000'000'123'456'789, 1, 0};
  trace.pid = 4242;
  trace.process_name = "server \"x\"";
  trace.hostname = "host";
  trace.policy = format::BufferPolicy::flight;
  const std::string text = format::make_metadata(trace);
  ASSERT_TRUE(text.starts_with("/* CTF 1.8 */"));
  const auto back = format::parse_metadata(text);
  EXPECT_EQ(back.uuid, trace.uuid);
  EXPECT_EQ(back.clock.frequency_hz, trace.clock.frequency_hz);
  EXPECT_EQ(back.clock.ticks_at_start, trace.clock.ticks_at_start);
  EXPECT_EQ(back.clock.realtime_ns_at_start, trace.clock.realtime_ns_at_start);
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.process_name, "server _x_");
  EXPECT_EQ(back.policy, format::BufferPolicy::flight);
}

TEST(Metadata, ClockOffsetMapsTicksToWallTime) {
  format::ClockCalibration clock{3'000'000'000, 9'000'000'000, 5, 1'700'000'000'000'000'000, 1, 0};
  // Three seconds of ticks after the start reference.
  EXPECT_NEAR(static_cast<double>(format::ticks_to_unix_ns(clock, 9'000'000'000 + 9'000'000'000)),
              1'700'000'003'000'000'000.0, 2.0);
  EXPECT_NEAR(static_cast<double>(format::ticks_to_unix_ns(clock, 9'000'000'000)), 1'700'000'000'000'000'000.0, 2.0);
}

TEST(Metadata, RejectsWhatIsNotOurs) {
  EXPECT_THROW(format::parse_metadata("not ctf"), std::runtime_error);
  EXPECT_THROW(format::parse_metadata("/* CTF 1.8 */\nenv { tracer_name = \"lttng-ust\"; };"), std::runtime_error);
}

TEST(Sizes, ParseUnits) {
  EXPECT_EQ(recorder::parse_size("4M"), size_t{4} << 20);
  EXPECT_EQ(recorder::parse_size("512K"), size_t{512} << 10);
  EXPECT_EQ(recorder::parse_size("1GiB"), size_t{1} << 30);
  EXPECT_EQ(recorder::parse_size("4096"), 4096u);
  EXPECT_THROW(recorder::parse_size("lots"), std::invalid_argument);
  EXPECT_THROW(recorder::parse_size("4X"), std::invalid_argument);
}

}  // namespace
}  // namespace chronicle

namespace chronicle::format {
namespace {

TEST(CategoryRules, GlobsMatchWholeNames) {
  EXPECT_TRUE(glob_matches("net.*", "net.tcp"));
  EXPECT_TRUE(glob_matches("net.*", "net."));
  EXPECT_FALSE(glob_matches("net.*", "net"));
  EXPECT_FALSE(glob_matches("net.*", "dnet.tcp"));
  EXPECT_TRUE(glob_matches("*", ""));
  EXPECT_TRUE(glob_matches("*.x", "b.y.x"));
  EXPECT_TRUE(glob_matches("b?x", "b.x"));
  EXPECT_FALSE(glob_matches("b?x", "b..x"));
  EXPECT_TRUE(glob_matches("a*b*c", "axxbyyc"));
  EXPECT_FALSE(glob_matches("a*b*c", "axxbyy"));
  EXPECT_TRUE(glob_matches("db", "db"));
  EXPECT_FALSE(glob_matches("db", "db2"));
}

TEST(CategoryRules, TheLastMatchingRuleDecides) {
  CategoryRules rules = CategoryRules::from_list("net.*,db");
  EXPECT_EQ(rules.state_of("net.tcp"), category_state_for_level(0));
  EXPECT_EQ(rules.state_of("db"), category_state_for_level(0));
  EXPECT_EQ(rules.state_of("ui"), kCategoryOff);
  ASSERT_TRUE(rules.add("net.udp", kCategoryOff));
  EXPECT_EQ(rules.state_of("net.udp"), kCategoryOff);
  EXPECT_EQ(rules.state_of("net.tcp"), category_state_for_level(0));
  ASSERT_TRUE(rules.add("net.*", category_state_for_level(3)));  // replaces the first, now last
  EXPECT_EQ(rules.state_of("net.udp"), category_state_for_level(3));
  EXPECT_EQ(rules.size(), 3u);
  EXPECT_EQ(CategoryRules::from_list("").state_of("any"), kCategoryOff);
  EXPECT_EQ(CategoryRules::from_list("*").state_of("any"), category_state_for_level(0));
  EXPECT_EQ(describe_category_state(kCategoryOff), "off");
  EXPECT_EQ(describe_category_state(category_state_for_level(0)), "on");
  EXPECT_EQ(describe_category_state(category_state_for_level(3)), "level 3");
}

TEST(CategoryRules, TheNumberOfPatternsIsBounded) {
  CategoryRules rules;
  for (size_t k = 0; k < CategoryRules::kMaxRules; ++k) ASSERT_TRUE(rules.add("c" + std::to_string(k), 1));
  EXPECT_FALSE(rules.would_accept("one.more"));
  EXPECT_FALSE(rules.add("one.more", 1));
  EXPECT_TRUE(rules.would_accept("c0"));
  EXPECT_TRUE(rules.add("c0", 0)) << "an existing pattern can always be changed";
}

// The one decoder reads back what write_event_header writes, and says why it cannot.
TEST(EventHeader, ReadsBackWhatTheWriterWrites) {
  uint8_t bytes[kExtendedHeaderSize] = {};
  EventHeader header;
  const uint64_t previous = (uint64_t{5} << kCompactTimestampBits) + kCompactTimestampMask - 2;
  // A compact header whose low bits wrapped: one more turn of the 27-bit field.
  write_event_header(bytes, true, 7, previous + 10);
  ASSERT_EQ(read_event_header(bytes, kCompactHeaderSize, previous, header), EventHeaderStatus::ok);
  EXPECT_FALSE(header.extended);
  EXPECT_EQ(header.id, 7u);
  EXPECT_EQ(header.ticks, previous + 10);
  EXPECT_EQ(header.size, kCompactHeaderSize);
  EXPECT_EQ(read_event_header(bytes, kCompactHeaderSize - 1, previous, header), EventHeaderStatus::cut_short);

  write_event_header(bytes, false, 40, previous + (uint64_t{1} << 40));
  ASSERT_EQ(read_event_header(bytes, sizeof bytes, previous, header), EventHeaderStatus::ok);
  EXPECT_TRUE(header.extended);
  EXPECT_EQ(header.id, 40u);
  EXPECT_EQ(header.ticks, previous + (uint64_t{1} << 40));
  EXPECT_EQ(header.size, kExtendedHeaderSize);
  EXPECT_EQ(read_event_header(bytes, kExtendedHeaderSize - 1, previous, header), EventHeaderStatus::cut_short);
  EXPECT_TRUE(header.extended);
  EXPECT_EQ(read_event_header(bytes, sizeof bytes, previous + (uint64_t{1} << 41), header),
            EventHeaderStatus::time_goes_backwards);
}

}  // namespace
}  // namespace chronicle::format
