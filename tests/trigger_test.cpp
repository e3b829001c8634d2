// Triggers on metrics (src/metrics/trigger.hpp): parsing, measuring over a window, and firing once
// per crossing with hysteresis.
#include <gtest/gtest.h>

#include "metrics/trigger.hpp"

namespace chronicle::metrics {
namespace {

TEST(TriggerParse, ReadsTheFormsOfTheIssue) {
  const TriggerCondition p99 = parse_trigger("rpc.latency_seconds:p99 > 0.05");
  EXPECT_EQ(p99.metric, "rpc.latency_seconds");
  EXPECT_EQ(p99.measure, TriggerMeasure::quantile);
  EXPECT_DOUBLE_EQ(p99.quantile, 0.99);
  EXPECT_TRUE(p99.above);
  EXPECT_FALSE(p99.inclusive);
  EXPECT_DOUBLE_EQ(p99.threshold, 0.05);

  const TriggerCondition rate = parse_trigger("errors rate > 10/s");
  EXPECT_EQ(rate.metric, "errors");
  EXPECT_EQ(rate.measure, TriggerMeasure::rate);
  EXPECT_DOUBLE_EQ(rate.threshold, 10);

  const TriggerCondition labelled = parse_trigger("queue.depth{pool=\"a:b\", vm=7} <= 3");
  EXPECT_EQ(labelled.metric, "queue.depth");
  EXPECT_EQ(labelled.measure, TriggerMeasure::value);
  EXPECT_EQ(labelled.where, (LabelList{{"pool", "a:b"}, {"vm", "7"}}));
  EXPECT_FALSE(labelled.above);
  EXPECT_TRUE(labelled.inclusive);

  EXPECT_DOUBLE_EQ(parse_trigger("x:p999>=1e-3").quantile, 0.999);
  EXPECT_EQ(parse_trigger("x mean < 2").measure, TriggerMeasure::mean);
}

TEST(TriggerParse, SaysWhatIsWrong) {
  auto message = [](const char* text) {
    try {
      parse_trigger(text);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("errors rate 10").find("no comparison"), std::string::npos);
  EXPECT_NE(message("errors > ten").find("'ten' is not a number"), std::string::npos);
  EXPECT_NE(message("errors:p9x > 1").find("not a quantile"), std::string::npos);
  EXPECT_NE(message("errors:median > 1").find("not a measure"), std::string::npos);
  EXPECT_NE(message(" > 1").find("no metric name"), std::string::npos);
  EXPECT_NE(message("x{pool} > 1").find("not label=value"), std::string::npos);
}

// A gauge wobbling around the line fires once; it fires again only after coming back past the
// hysteresis margin (10%: below 4.5 for "> 5").
TEST(TriggerState, FiresExactlyOncePerCrossingWithHysteresis) {
  TriggerState state(parse_trigger("load > 5"), 0.1);
  const double values[] = {1, 4.9, 5, 6, 7, 4.8, 6, 4.6, 5.5, 4.5, 4.4, 5.1, 5.2, 0, 9};
  std::vector<double> fired_at;
  int rearmed = 0;
  for (double value : values) {
    const auto step = state.observe(value);
    if (step == TriggerState::Step::fired) fired_at.push_back(value);
    rearmed += step == TriggerState::Step::rearmed;
  }
  EXPECT_EQ(fired_at, (std::vector<double>{6, 5.1, 9}));
  EXPECT_EQ(rearmed, 2);
  EXPECT_FALSE(state.armed());
  // No value (no such metric yet) changes nothing.
  EXPECT_EQ(state.observe(std::nullopt), TriggerState::Step::none);
}

TEST(TriggerState, BelowTriggersAndAZeroThreshold) {
  TriggerState below(parse_trigger("free < 10"), 0.5);  // re-arms at 15 or more
  EXPECT_EQ(below.observe(9), TriggerState::Step::fired);
  EXPECT_EQ(below.observe(14), TriggerState::Step::none);
  EXPECT_EQ(below.observe(15), TriggerState::Step::rearmed);
  EXPECT_EQ(below.observe(10), TriggerState::Step::none);  // "< 10": not crossed
  EXPECT_EQ(below.observe(9.9), TriggerState::Step::fired);

  TriggerState errors(parse_trigger("errors rate > 0"), 0.1);  // no margin around 0
  EXPECT_EQ(errors.observe(0.5), TriggerState::Step::fired);
  EXPECT_EQ(errors.observe(0), TriggerState::Step::rearmed);
  EXPECT_EQ(errors.observe(0.1), TriggerState::Step::fired);
}

MetricSample histogram(const std::vector<uint64_t>& buckets, double sum) {
  MetricSample sample;
  sample.name = "rpc.latency_seconds";
  sample.kind = format::MetricKind::histogram;
  sample.bounds = {0.01, 0.1, 1};
  sample.buckets = buckets;
  sample.sum = sum;
  for (uint64_t count : buckets) sample.count += count;
  sample.value = static_cast<double>(sample.count);
  return sample;
}

MetricsSnapshot snapshot(uint64_t ns, std::vector<MetricSample> metrics) {
  MetricsSnapshot out;
  out.monotonic_ns = ns;
  out.metrics = std::move(metrics);
  return out;
}

// Quantiles and rates are of the window: what happened since its first snapshot, not since start.
TEST(TriggerMeasure, QuantilesAndRatesCoverTheWindowOnly) {
  MetricSample errors;
  errors.name = "errors";
  errors.kind = format::MetricKind::counter;
  errors.value = 1000;
  // A long quiet past (1000 fast calls), then 100 slow ones in the last second.
  const MetricsSnapshot before = snapshot(1'000'000'000, {histogram({1000, 0, 0, 0}, 5), errors});
  errors.value = 1030;
  const MetricsSnapshot after = snapshot(2'000'000'000, {histogram({1000, 0, 100, 0}, 55), errors});
  const auto p99 = measure(parse_trigger("rpc.latency_seconds:p99 > 0.05"), before, after);
  ASSERT_TRUE(p99.has_value());
  EXPECT_GT(*p99, 0.1);  // in the (0.1, 1] bucket: all of the window's calls are slow
  const auto mean = measure(parse_trigger("rpc.latency_seconds:mean > 0.05"), before, after);
  ASSERT_TRUE(mean.has_value());
  EXPECT_DOUBLE_EQ(*mean, 0.5);
  const auto rate = measure(parse_trigger("errors rate > 10/s"), before, after);
  ASSERT_TRUE(rate.has_value());
  EXPECT_DOUBLE_EQ(*rate, 30);
  EXPECT_DOUBLE_EQ(*measure(parse_trigger("errors > 1"), before, after), 1030);
  // No observation in the window: nothing to compare.
  EXPECT_FALSE(measure(parse_trigger("rpc.latency_seconds:p99 > 0.05"), after, after).has_value());
  EXPECT_FALSE(measure(parse_trigger("nosuch > 1"), before, after).has_value());
}

TEST(TriggerMeasure, TheWindowKeepsOneSnapshotAtLeastItsLengthOld) {
  SnapshotWindow window(std::chrono::seconds(1));
  EXPECT_EQ(window.add(snapshot(0, {})).monotonic_ns, 0u);
  EXPECT_EQ(window.add(snapshot(400'000'000, {})).monotonic_ns, 0u);
  EXPECT_EQ(window.add(snapshot(1'000'000'000, {})).monotonic_ns, 0u);
  EXPECT_EQ(window.add(snapshot(1'500'000'000, {})).monotonic_ns, 400'000'000u);
  EXPECT_EQ(window.add(snapshot(3'000'000'000, {})).monotonic_ns, 1'500'000'000u);
}

}  // namespace
}  // namespace chronicle::metrics
