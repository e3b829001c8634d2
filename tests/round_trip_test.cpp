// Events written in this process are read back exactly: counts, order per thread, fields.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chronicle/chronicle.hpp>
#include <chrono>
#include <filesystem>
#include <latch>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "collector/collector.hpp"
#include "support.hpp"
#include "undrained_session.hpp"

namespace chronicle {
namespace {

using test::TemporaryDirectory;
using namespace std::chrono_literals;

using test::test_config;

void write_events(int thread_index, int count) {
  for (int i = 0; i < count; ++i) {
    CHRONICLE_SPAN("test", "outer");
    CHRONICLE_COUNTER("test", "sequence", static_cast<int64_t>(thread_index) * 1'000'000 + i);
    if (i % 100 == 0) CHRONICLE_NOTE("test", "thread {} at {}", thread_index, i);
    if (i % 7 == 0) CHRONICLE_INSTANT("test", "seventh");
    CHRONICLE_COUNTER("test", "ratio", i / 4.0);
  }
}

TEST(RoundTrip, EveryEventOfEveryThreadComesBackInOrderWithItsFields) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.buffer_size = 4 << 20;  // room for all, in many packets
  config.packet_size = 16 << 10;
  ASSERT_TRUE(start(config)) << last_error();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(write_events, t, kPerThread);
  for (auto& thread : threads) thread.join();
  stop();

  reader::Trace trace(config.output);
  ASSERT_EQ(trace.events_discarded(), 0u);
  ASSERT_EQ(trace.streams().size(), size_t{kThreads});
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    std::vector<reader::Event> events;
    trace.for_each_in_stream(stream, [&](const reader::Event& event) {
      events.push_back(event);
      return true;
    });
    // Per iteration: begin, counter, (note), (instant), counter_float, end.
    const size_t expected = kPerThread * 4 + kPerThread / 100 + (kPerThread + 6) / 7;
    ASSERT_EQ(events.size(), expected);
    int64_t base = -1;
    size_t cursor = 0;
    uint64_t previous_ticks = 0;
    for (int i = 0; i < kPerThread; ++i) {
      ASSERT_EQ(events[cursor].type, format::EventId::span_begin);
      EXPECT_EQ(trace.site(events[cursor].name_id)->name, "outer");
      ASSERT_GE(events[cursor].ticks, previous_ticks);
      ++cursor;
      ASSERT_EQ(events[cursor].type, format::EventId::counter);
      EXPECT_EQ(trace.site(events[cursor].name_id)->name, "sequence");
      if (base < 0) base = events[cursor].value / 1'000'000 * 1'000'000;
      ASSERT_EQ(events[cursor].value, base + i);
      ++cursor;
      if (i % 100 == 0) {
        ASSERT_EQ(events[cursor].type, format::EventId::note);
        EXPECT_EQ(events[cursor].text, fmt::format("thread {} at {}", base / 1'000'000, i));
        EXPECT_EQ(trace.site(events[cursor].name_id)->name, "thread {} at {}");
        ++cursor;
      }
      if (i % 7 == 0) {
        ASSERT_EQ(events[cursor].type, format::EventId::instant);
        EXPECT_EQ(trace.site(events[cursor].name_id)->name, "seventh");
        ++cursor;
      }
      ASSERT_EQ(events[cursor].type, format::EventId::counter_float);
      EXPECT_DOUBLE_EQ(events[cursor].value_float, i / 4.0);
      ++cursor;
      ASSERT_EQ(events[cursor].type, format::EventId::span_end);
      EXPECT_EQ(trace.site(events[cursor].name_id)->name, "outer");
      previous_ticks = events[cursor].ticks;
      ++cursor;
    }
  }
  const reader::Site* outer = nullptr;
  for (const auto& site : trace.sites())
    if (site.name == "outer") outer = &site;
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->category, "test");
  EXPECT_EQ(outer->kind, format::SiteKind::span);
  EXPECT_TRUE(outer->file.ends_with("round_trip_test.cpp"));
}

int64_t realtime_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec * 1'000'000'000LL + now.tv_nsec;
}

TEST(RoundTrip, TimestampsAreWallClockTimeAcrossLongGaps) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  std::vector<std::pair<int64_t, int64_t>> brackets;  // wall time just before and after each event
  for (int i = 0; i < 4; ++i) {
    const int64_t before = realtime_ns();
    CHRONICLE_INSTANT("test", "tick");
    brackets.emplace_back(before, realtime_ns());
    // Longer than the 27-bit compact timestamp covers: the extended header must take over.
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }
  stop();
  reader::Trace trace(config.output);
  auto events = test::read_all(trace);
  ASSERT_EQ(events.size(), 4u);
  // The clock is calibrated against CLOCK_REALTIME; allow it 1 ms of error over the run.
  constexpr int64_t kSlack = 1'000'000;
  for (size_t i = 0; i < events.size(); ++i) {
    const int64_t recorded = trace.to_unix_ns(events[i].ticks);
    EXPECT_GE(recorded, brackets[i].first - kSlack) << "event " << i;
    EXPECT_LE(recorded, brackets[i].second + kSlack) << "event " << i;
  }
}

TEST(RoundTrip, OnlyTheChosenCategoriesAreRecorded) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.categories = "kept,also";
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 10; ++i) {
    CHRONICLE_INSTANT("kept", "a");
    CHRONICLE_INSTANT("dropped", "b");
    CHRONICLE_SPAN("also", "c");
  }
  stop();
  reader::Trace trace(config.output);
  std::map<std::string, int> by_category;
  for (const auto& event : test::read_all(trace)) ++by_category[trace.site(event.name_id)->category];
  EXPECT_EQ(by_category["kept"], 10);
  EXPECT_EQ(by_category["also"], 20);
  EXPECT_EQ(by_category.count("dropped"), 0u);
}

TEST(RoundTrip, NothingIsRecordedWithoutASession) {
  EXPECT_FALSE(active());
  for (int i = 0; i < 10; ++i) CHRONICLE_INSTANT("test", "ignored");
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_FALSE(start(config)) << "a second session must be refused";
  EXPECT_NE(last_error().find("already"), std::string::npos);
  CHRONICLE_INSTANT("test", "kept");
  stop();
  reader::Trace trace(config.output);
  EXPECT_EQ(test::read_all(trace).size(), 1u);
}

// A compressed trace holds a stream's packets back until its unit is written (about 1 MiB, or
// a second old): what the collector says is complete in the files must not count them, or a
// reader of the growing trace (record --otlp-endpoint) would pass events by and see them later.
TEST(LiveReading, WhatACompressedTraceHoldsInAUnitIsNotCountedComplete) {
  TemporaryDirectory directory;
  Config config;
  config.shm_dir = directory.path();
  config.keep_shm = true;
  config.packet_size = 4 << 10;
  ASSERT_TRUE(start(config)) << last_error();
  const std::string mapping_path = shm_path();
  collector::SessionMapping mapping(mapping_path);
  collector::CollectorOptions options;
  options.compress = true;
  collector::Collector collector(mapping, directory / "trace", options);
  // A thread writes and ends (its packet closed), then this one writes and keeps its packet open.
  std::thread([] { CHRONICLE_INSTANT("test", "ended"); }).join();
  CHRONICLE_INSTANT("test", "open");
  collector.drain();
  const uint64_t complete_below = collector.complete_below();
  stop();
  collector.finish();
  const reader::Trace trace(directory / "trace");
  const auto ended = test::read_category(trace, "test");
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_LE(complete_below, ended.front().ticks) << "the ended thread's event was still in a unit";
}

// A session with no collector in the process, its mapping claimed by the test, which drains it
// as `record` drains a program's (null, with a failure, when it cannot start).
std::unique_ptr<collector::SessionMapping> start_drained_session(const TemporaryDirectory& directory,
                                                                 std::chrono::milliseconds self_stats_interval) {
  Config config;
  config.shm_dir = directory.path();
  config.keep_shm = true;
  config.self_stats_interval = self_stats_interval;
  if (!start(config)) {
    ADD_FAILURE() << last_error();
    return nullptr;
  }
  auto mapping = std::make_unique<collector::SessionMapping>(shm_path());
  uint32_t holder = 0;
  if (!collector::claim_session(*mapping, holder)) {
    ADD_FAILURE() << "the session is claimed by process " << holder;
    stop();
    return nullptr;
  }
  return mapping;
}

// Drains until the collector says every event older than `time` is in the files, or `limit` passes.
void drain_until_complete(collector::Collector& collector, uint64_t time, std::chrono::steady_clock::time_point limit) {
  collector.drain();
  while (collector.complete_below() < time && std::chrono::steady_clock::now() < limit) {
    collector.wait_for_work(10ms);
    collector.drain();
  }
}

// The session's control thread writes its samples of the session's own counts a few times a
// second, far from filling a packet. An open packet holds back what the collector says is
// complete (its start), so the control thread must not keep one open between samples: the live
// push (record --otlp-endpoint) would wait, from the first sample on, until it filled.
TEST(LiveReading, TheSessionsOwnSamplesDoNotHoldBackWhatIsComplete) {
  TemporaryDirectory directory;
  const auto drained = start_drained_session(directory, std::chrono::milliseconds(100));
  ASSERT_TRUE(drained);
  collector::SessionMapping& mapping = *drained;
  collector::Collector collector(mapping, directory / "trace");
  const auto control_thread_wrote = [&] {
    for (uint32_t index = 0; index < mapping.channel_count(); ++index)
      if (std::string_view(mapping.channel(index).thread_name) == "chronicle-ctl") return true;
    return false;
  };
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!control_thread_wrote() && std::chrono::steady_clock::now() < limit) collector.wait_for_work(10ms);
  ASSERT_TRUE(control_thread_wrote()) << "no sample within 30 s";
  const uint64_t before = detail::read_ticks();
  std::thread([] { CHRONICLE_INSTANT("test", "ended"); }).join();
  drain_until_complete(collector, before, limit);
  EXPECT_GE(collector.complete_below(), before) << "the control thread's open packet held it back";
  stop();
  collector.finish();
}

// A thread that wrote a few events and waits keeps its packet open. Uncut, what the collector
// says is complete stops at that packet's start until the thread fills it or ends, and the live
// push (record --otlp-endpoint) with it. Cut, the events it wrote are written as a packet of their
// own; here one packet is cut twice and its rest written when the thread ends, and every event
// reads back once, in order, at its own time, as chronicle's reader and babeltrace2 see it.
TEST(LiveReading, AQuietThreadsOpenPacketIsCutAndDoesNotHoldBackWhatIsComplete) {
  TemporaryDirectory directory;
  const auto drained = start_drained_session(directory, std::chrono::milliseconds(0));
  ASSERT_TRUE(drained);
  collector::CollectorOptions options;
  options.cut_open_packets_after = 20ms;
  collector::Collector collector(*drained, directory / "trace", options);

  constexpr int kPhases = 3;
  constexpr int kPerPhase = 3;
  std::array<std::pair<uint64_t, uint64_t>, kPhases * kPerPhase> brackets{};  // each counter's time lies within
  std::array<std::latch, kPhases> written{std::latch(1), std::latch(1), std::latch(1)};
  std::array<std::latch, kPhases> go_on{std::latch(1), std::latch(1), std::latch(1)};
  std::thread quiet([&] {
    for (int phase = 0; phase < kPhases; ++phase) {
      if (phase > 0) go_on[phase - 1].wait();
      for (int k = phase * kPerPhase; k < (phase + 1) * kPerPhase; ++k) {
        brackets[k].first = detail::read_ticks();
        CHRONICLE_COUNTER("quiet", "k", k);
        brackets[k].second = detail::read_ticks();
      }
      written[phase].count_down();
    }
  });
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int phase = 0; phase + 1 < kPhases; ++phase) {
    written[phase].wait();
    const uint64_t last_written = brackets[(phase + 1) * kPerPhase - 1].first;
    drain_until_complete(collector, last_written, limit);
    EXPECT_GE(collector.complete_below(), last_written)
        << "phase " << phase << ": the quiet thread's packet held it back";
    go_on[phase].count_down();
  }
  quiet.join();
  stop();
  collector.finish();

  const reader::Trace trace(directory / "trace");
  EXPECT_EQ(trace.events_discarded(), 0u);
  EXPECT_TRUE(trace.damage().empty());
  const auto events = test::read_category(trace, "quiet");
  ASSERT_EQ(events.size(), brackets.size());
  for (size_t k = 0; k < events.size(); ++k) {
    SCOPED_TRACE("counter " + std::to_string(k));
    EXPECT_EQ(events[k].value, static_cast<int64_t>(k));
    EXPECT_GE(events[k].ticks, brackets[k].first);
    EXPECT_LE(events[k].ticks, brackets[k].second);
  }
  const auto babeltrace = test::run("babeltrace2 " + (directory / "trace"));
  EXPECT_EQ(babeltrace.exit_code, 0) << babeltrace.err;
  EXPECT_EQ(babeltrace.err, "") << "no lost packet, no discarded event";
  size_t counters = 0;
  for (size_t at = babeltrace.out.find(" counter: "); at != std::string::npos;
       at = babeltrace.out.find(" counter: ", at + 1))
    ++counters;
  EXPECT_EQ(counters, events.size()) << babeltrace.out;
}

TEST(Drops, WrittenEqualsReadPlusDiscardedWhenNoCollectorDrains) {
  TemporaryDirectory directory;
  constexpr int kWritten = 200'000;
  const reader::Trace trace = test::record_with_no_collector(directory, [] {
    for (int i = 0; i < kWritten; ++i) CHRONICLE_COUNTER("test", "n", i);
  });
  // The session's own counters come on top, and none of them was lost.
  const auto events = test::read_category(trace, "test");
  EXPECT_GT(trace.events_discarded(), 0u);
  EXPECT_EQ(events.size() + trace.events_discarded(), size_t{kWritten});
  // What was kept is in order and each value appears once.
  for (size_t i = 1; i < events.size(); ++i) ASSERT_GT(events[i].value, events[i - 1].value);
}

TEST(Drops, ASpanWhoseBeginIsDroppedCountsItsEndAsDiscardedToo) {
  TemporaryDirectory directory;
  constexpr int kSpans = 100'000;
  const reader::Trace trace = test::record_with_no_collector(directory, [] {
    for (int i = 0; i < kSpans; ++i) {
      CHRONICLE_SPAN("test", "span");
    }
  });
  const auto events = test::read_category(trace, "test");
  EXPECT_GT(trace.events_discarded(), 0u);
  EXPECT_EQ(events.size() + trace.events_discarded(), size_t{2 * kSpans});
}

TEST(FlightRecorder, KeepsTheMostRecentEventsWithoutGaps) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.mode = Mode::flight;
  config.buffer_size = 32 << 10;
  config.packet_size = 4 << 10;
  ASSERT_TRUE(start(config)) << last_error();
  constexpr int kWritten = 100'000;
  for (int i = 0; i < kWritten; ++i) CHRONICLE_COUNTER("test", "n", i);
  stop();
  reader::Trace trace(config.output);
  const auto events = test::read_all(trace);
  ASSERT_FALSE(events.empty());
  EXPECT_LT(events.size(), size_t{kWritten});
  EXPECT_EQ(events.back().value, kWritten - 1);
  for (size_t i = 1; i < events.size(); ++i) ASSERT_EQ(events[i].value, events[i - 1].value + 1);
  EXPECT_EQ(trace.events_discarded(), 0u);
}

// Snapshots (the snapshot signal) taken while a thread fills a small ring, which it laps many
// times during each copy: each is the newest run of that thread's counters, with no hole, and
// copying the slots the writer is filling or reusing races with nothing (the TSan suite runs
// this).
TEST(FlightRecorder, ASnapshotTakenWhileAThreadWritesIsItsNewestEventsWithoutGaps) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.mode = Mode::flight;
  config.buffer_size = 32 << 10;
  config.packet_size = 4 << 10;
  config.snapshot_signal = SIGUSR2;
  config.snapshot_dir = directory.path();
  ASSERT_TRUE(start(config)) << last_error();
  std::atomic<bool> done{false};
  std::atomic<int64_t> written{0};
  std::thread writer([&] {
    for (int64_t i = 0; !done.load(std::memory_order_relaxed); ++i) {
      CHRONICLE_COUNTER("test", "n", i);
      written.store(i + 1, std::memory_order_relaxed);
    }
  });
  constexpr int kSnapshots = 5;
  std::vector<std::string> snapshots;
  for (int n = 1; n <= kSnapshots; ++n) {
    // Well into the writing, so that the ring has been lapped before the copy starts.
    const int64_t before = written.load(std::memory_order_relaxed);
    while (written.load(std::memory_order_relaxed) < before + 10'000) std::this_thread::yield();
    if (kill(getpid(), SIGUSR2) != 0) break;
    const std::string name = directory / ("chronicle-snapshot-" + std::to_string(getpid()) + "-" + std::to_string(n));
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(name) && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!std::filesystem::exists(name)) break;
    snapshots.push_back(name);
  }
  done.store(true, std::memory_order_relaxed);
  writer.join();
  stop();
  ASSERT_EQ(snapshots.size(), size_t{kSnapshots}) << "no snapshot after SIGUSR2";
  for (const std::string& snapshot : snapshots) {
    SCOPED_TRACE(snapshot);
    reader::Trace trace(snapshot);
    const auto events = test::read_category(trace, "test");
    ASSERT_FALSE(events.empty());
    for (size_t i = 1; i < events.size(); ++i) ASSERT_EQ(events[i].value, events[i - 1].value + 1);
  }
}

// The snapshot signal as soon as start() returns, before the session's control thread may have
// looked at its bell: the snapshot is still taken.
TEST(FlightRecorder, TheSnapshotSignalRightAfterStartIsNotLost) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.mode = Mode::flight;
  config.snapshot_signal = SIGUSR2;
  config.snapshot_dir = directory.path();
  ASSERT_TRUE(start(config)) << last_error();
  CHRONICLE_INSTANT("test", "before the signal");
  ASSERT_EQ(raise(SIGUSR2), 0);
  const std::string name = directory / ("chronicle-snapshot-" + std::to_string(getpid()) + "-1");
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(name) && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Before stop(), whose own ring of the bell would have the request seen at last.
  const bool taken = std::filesystem::exists(name);
  stop();
  ASSERT_TRUE(taken) << "no snapshot in the 30 s after SIGUSR2";
  reader::Trace trace(name);
  EXPECT_EQ(test::read_category(trace, "test").size(), 1u);
}

}  // namespace
}  // namespace chronicle
