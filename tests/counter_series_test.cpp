// Counter series as every reader shows them: one series per category and name, whichever call
// site or thread wrote it, and metric counters (traced as increments) as their running total.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/metrics.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "analysis/counter_windows.hpp"
#include "analysis/profile.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;

void open_connections_at_accept(int64_t count) {
  CHRONICLE_COUNTER("echo", "open connections", count);
}
void open_connections_at_close(int64_t count) {
  CHRONICLE_COUNTER("echo", "open connections", count);
}

void queue_depth(int64_t depth) {
  CHRONICLE_COUNTER("pool", "queue depth", depth);
}

// Lines of `text` that begin with `prefix`.
size_t lines_starting_with(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  size_t found = 0;
  for (std::string line; std::getline(lines, line);) found += line.rfind(prefix, 0) == 0;
  return found;
}

size_t series_labelled(const analysis::CounterWindows& windows, const std::string& label) {
  size_t found = 0;
  for (const auto& series : windows.series()) found += series.label() == label;
  return found;
}

TEST(CounterSeries, TwoCallSitesOfOneNameAreOneSeries) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  open_connections_at_accept(1);
  open_connections_at_accept(2);
  open_connections_at_close(1);
  stop();
  reader::Trace trace(config.output);
  const analysis::CounterWindows windows(trace);
  ASSERT_EQ(series_labelled(windows, "echo/open connections"), 1u);
  for (const auto& series : windows.series()) {
    if (series.label() == "echo/open connections") {
      EXPECT_EQ(series.size(), 3u);
      EXPECT_EQ(series.window(windows.first_ns(), windows.last_ns()).last, 1) << "the level the last write left";
    }
  }
  const auto shown = run(kCli + " stats --counters " + config.output);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(lines_starting_with(shown.out, "echo/open connections "), 1u) << shown.out;
}

TEST(CounterSeries, TenThreadsWritingOneCounterAreOneSeries) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  std::vector<std::thread> writers;
  for (int thread = 0; thread < 10; ++thread)
    writers.emplace_back([thread] {
      for (int k = 0; k < 5; ++k) queue_depth(thread * 10 + k);
    });
  for (auto& writer : writers) writer.join();
  stop();
  reader::Trace trace(config.output);
  const analysis::CounterWindows windows(trace);
  ASSERT_EQ(series_labelled(windows, "pool/queue depth"), 1u);
  const analysis::Profile profile = analysis::profile_trace(trace);
  ASSERT_EQ(profile.counters.size(), 1u);
  EXPECT_EQ(profile.counters[0].samples, 50u);
  const auto shown = run(kCli + " stats --counters " + config.output);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(lines_starting_with(shown.out, "pool/queue depth "), 1u) << shown.out;
}

// 40 increments from two threads and a histogram whose observations shrink: readers show the
// counter climbing to 40, and neither rate is negative.
class MetricCounterTrace : public ::testing::Test {
 protected:
  static constexpr int kIncrements = 40;

  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    Counter requests{"test.series_requests"};
    Histogram latency{"test.series_latency"};
    Config config = test::test_config(*directory_);
    ASSERT_TRUE(start(config)) << last_error();
    std::thread other([&requests] {
      for (int k = 0; k < kIncrements / 2; ++k) requests.inc();
    });
    for (int k = 0; k < kIncrements / 2; ++k) requests.inc();
    other.join();
    for (int k = 10; k > 0; --k) latency.observe(k * 0.1);
    stop();
  }
  static void TearDownTestSuite() { delete directory_; }
  static std::string trace_path() { return *directory_ / "trace"; }

  static TemporaryDirectory* directory_;
};
TemporaryDirectory* MetricCounterTrace::directory_ = nullptr;

TEST_F(MetricCounterTrace, DumpShowsTheIncrementAndTheTotal) {
  const auto dumped = run(kCli + " dump " + trace_path() + " --name test.series_requests");
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  ASSERT_EQ(test::count_lines(dumped.out), static_cast<size_t>(kIncrements)) << dumped.out;
  // In time order, each line adds its increment to the total.
  std::vector<std::string> fields;
  std::istringstream lines(dumped.out);
  const std::string name = "metrics/test.series_requests";
  for (std::string line; std::getline(lines, line);) fields.push_back(line.substr(line.find(name) + name.size()));
  std::vector<std::string> expected;
  for (int total = 1; total <= kIncrements; ++total) expected.push_back(fmt::format(" increment=1 total={}", total));
  EXPECT_EQ(fields, expected) << dumped.out.substr(0, dumped.out.find('\n'));
}

TEST_F(MetricCounterTrace, StatsShowTheTotalAndRatesThatAreNotNegative) {
  reader::Trace trace(trace_path());
  const analysis::Profile profile = analysis::profile_trace(trace);
  const analysis::CounterProfile* requests = nullptr;
  const analysis::CounterProfile* latency = nullptr;
  for (const auto& counter : profile.counters) {
    if (counter.name == "test.series_requests") requests = &counter;
    if (counter.name == "test.series_latency") latency = &counter;
  }
  ASSERT_NE(requests, nullptr);
  ASSERT_NE(latency, nullptr);
  EXPECT_EQ(requests->samples, static_cast<uint64_t>(kIncrements));
  EXPECT_EQ(requests->last, kIncrements);
  EXPECT_EQ(requests->max, kIncrements);
  EXPECT_GT(requests->rate_per_second, 0);
  EXPECT_EQ(latency->samples, 10u);
  EXPECT_GT(latency->rate_per_second, 0) << "observations per second";

  const auto shown = run(kCli + " stats --json " + trace_path());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const auto json = nlohmann::json::parse(shown.out);
  const auto& profiles = json.is_array() ? json : nlohmann::json::array({json});
  bool seen = false;
  for (const auto& one : profiles)
    for (const auto& counter : one["counters"]) {
      if (counter["name"] == "test.series_requests") {
        seen = true;
        EXPECT_EQ(counter["last"], kIncrements);
      }
      EXPECT_GE(counter["rate_per_second"].get<double>(), 0) << counter.dump();
    }
  EXPECT_TRUE(seen) << shown.out;

  const analysis::CounterWindows windows(trace);
  for (const auto& series : windows.series()) {
    if (series.label() == "test.series_requests") {
      EXPECT_EQ(series.window(windows.first_ns(), windows.last_ns()).last, kIncrements);
    }
  }
}

TEST_F(MetricCounterTrace, ChromeCounterEventsCarryTheTotal) {
  TemporaryDirectory scratch;
  const auto exported = run(kCli + " export " + trace_path() + " --format chrome -o " + (scratch / "out.json"));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream file(scratch / "out.json");
  const auto json = nlohmann::json::parse(file);
  const auto& events = json.is_array() ? json : json["traceEvents"];
  std::vector<double> values;
  for (const auto& event : events)
    if (event["ph"] == "C" && event["name"].get<std::string>().find("test.series_requests") != std::string::npos)
      values.push_back(event["args"]["value"].get<double>());
  ASSERT_EQ(values.size(), static_cast<size_t>(kIncrements));
  for (size_t k = 0; k < values.size(); ++k) EXPECT_EQ(values[k], static_cast<double>(k + 1));
}

}  // namespace
}  // namespace chronicle
