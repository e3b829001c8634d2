// `chronicle stats` reads the threads apart on several cores when the trace allows it: the
// profile must then be the one the time-ordered merge gives, to the bit, on every kind of trace
// (spans, nested and crossing spans, tasks, counters of every kind, damage, many threads, a
// thread id used by two streams, a stream that goes back in time), read with 1 to 8 threads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/task.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "analysis/profile.hpp"
#include "format/trace_writer.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using format::EventId;
using test::TemporaryDirectory;

// Every field of a profile, doubles by their bits: two profiles are equal when these are.
std::string describe(const analysis::Profile& p) {
  auto number = [](double value) { return fmt::format("{}({:x})", value, std::bit_cast<uint64_t>(value)); };
  auto distribution = [](const analysis::Distribution& d) {
    return fmt::format("n={} total={} p50={} p90={} p99={} max={}", d.count, d.total, d.p50, d.p90, d.p99, d.max);
  };
  std::string out =
      fmt::format("{} {} {} {} events={} bytes={} discarded={} duration={} first={}\n", p.directory, p.hostname,
                  p.process_name, p.pid, p.events, p.bytes, p.discarded, p.duration, p.first_unix_ns);
  for (const auto& span : p.spans)
    out += fmt::format("span {}/{} {} self={}\n", span.category, span.name, distribution(span.duration), span.self);
  for (const auto& thread : p.threads)
    out += fmt::format("thread {} {} events={} busy={} idle={} span={} discarded={}\n", thread.thread_id, thread.name,
                       thread.events, thread.busy, thread.idle, thread.span, thread.discarded);
  for (const auto& kind : p.task_kinds)
    out += fmt::format("tasks {} {} {} {} {} life {} run {}\n", kind.kind, kind.count, kind.failed, kind.cancelled,
                       kind.unresolved, distribution(kind.lifetime), distribution(kind.run_time));
  for (const auto& counter : p.counters)
    out +=
        fmt::format("counter {}/{} {} samples={} min={} max={} first={} last={} rate={}\n", counter.category,
                    counter.name, analysis::kind_name(counter.kind), counter.samples, number(counter.min),
                    number(counter.max), number(counter.first), number(counter.last), number(counter.rate_per_second));
  for (const auto& problem : p.problems) out += "problem " + problem + "\n";
  return out;
}

// The trace's profile through the merge and through the threads apart (with 1, 2, 3 and 8
// threads): all equal. Returns whether the threads were read apart.
bool expect_same_profiles(const std::string& directory) {
  const reader::Trace trace(directory);
  analysis::ProfileOptions merged;
  merged.parallel = false;
  const analysis::Profile expected = analysis::profile_trace(trace, {}, merged);
  EXPECT_FALSE(expected.read_in_parallel);
  EXPECT_EQ(describe(analysis::profile_trace(trace)), describe(expected)) << "the default reading";
  bool apart = false;
  using Pieces = analysis::ProfileOptions::Pieces;
  for (const Pieces pieces : {Pieces::automatic, Pieces::always, Pieces::never}) {
    for (const unsigned threads : {1u, 2u, 3u, 8u}) {
      analysis::ProfileOptions options;
      options.threads = threads;
      options.pieces = pieces;
      uint64_t last_progress = 0;
      const analysis::Profile profile = analysis::profile_trace(
          trace, [&](uint64_t seen, uint64_t) { last_progress = seen; }, options);
      EXPECT_EQ(describe(profile), describe(expected)) << threads << " threads, pieces " << static_cast<int>(pieces)
                                                       << (profile.read_in_pieces ? " (read in pieces)" : "");
      EXPECT_EQ(last_progress, expected.events) << "the last progress report counts every event";
      if (pieces == Pieces::never) {
        EXPECT_FALSE(profile.read_in_pieces);
      }
      apart = profile.read_in_parallel;
    }
  }
  return apart;
}

format::TraceDescription crafted_description() {
  format::TraceDescription description;
  for (size_t i = 0; i < description.uuid.size(); ++i) description.uuid[i] = static_cast<uint8_t>(0x40 + i);
  description.clock = {1'000'000'000, 0, 0, 1'700'000'000'000'000'000, 0, 0};
  description.pid = 4242;
  description.process_name = "crafted";
  description.hostname = "testhost";
  return description;
}

uint64_t bits(double value) {
  return std::bit_cast<uint64_t>(value);
}

// The bytes of a stream file's packets, rewritten by `edit(header)` (all sound traces' packets
// here are whole).
void edit_packet_headers(const std::string& path, const std::function<void(format::PacketHeader&)>& edit) {
  std::vector<uint8_t> bytes(std::filesystem::file_size(path));
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  for (size_t offset = 0; offset < bytes.size();) {
    auto& header = *reinterpret_cast<format::PacketHeader*>(bytes.data() + offset);
    const size_t size = header.packet_size_bits / 8;
    edit(header);
    offset += size;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<std::string> stream_files(const std::string& directory) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    if (entry.path().filename().string().starts_with("thread-")) paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

Config small_packets(const TemporaryDirectory& directory) {
  Config config = test::test_config(directory);
  config.buffer_size = 8 << 20;  // room for everything: no drops
  config.packet_size = 4 << 10;  // many packets per stream
  return config;
}

void spans_and_counters(int thread, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    CHRONICLE_SPAN("parallel", "request");
    CHRONICLE_COUNTER("parallel", "queue", round % 7 + thread);
    {
      CHRONICLE_SPAN("parallel", "parse");
      CHRONICLE_INSTANT("parallel", "parsed");
    }
    if (round % 10 == 0) CHRONICLE_NOTE("parallel", "thread {} round {}", thread, round);
  }
}

std::string record_threads(const TemporaryDirectory& directory, int threads, int rounds) {
  const Config config = small_packets(directory);
  EXPECT_TRUE(start(config)) << last_error();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back([t, rounds] { spans_and_counters(t, rounds); });
  for (auto& worker : workers) worker.join();
  stop();
  return config.output;
}

TEST(StatsParallel, SpansOnly) {
  TemporaryDirectory directory;
  const Config config = small_packets(directory);
  ASSERT_TRUE(start(config)) << last_error();
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t)
    workers.emplace_back([] {
      for (int i = 0; i < 2000; ++i) {
        CHRONICLE_SPAN("parallel", "alone");
      }
    });
  for (auto& worker : workers) worker.join();
  stop();
  EXPECT_TRUE(expect_same_profiles(config.output));
}

TEST(StatsParallel, ManyThreadsWithSharedCounters) {
  TemporaryDirectory directory;
  EXPECT_TRUE(expect_same_profiles(record_threads(directory, 8, 3000)));
}

// Nesting, crossing ends, ends with no begin, spans never ended, two call sites of one name, a
// site the definitions lack; ends at the same tick on several threads.
TEST(StatsParallel, NestedAndCrossingSpans) {
  TemporaryDirectory directory;
  format::TraceWriter writer(crafted_description());
  const uint32_t outer = writer.define_site(format::SiteKind::span, "nest", "outer");
  const uint32_t inner = writer.define_site(format::SiteKind::span, "nest", "inner");
  const uint32_t leaf = writer.define_site(format::SiteKind::span, "nest", "leaf");
  const uint32_t other = writer.define_site(format::SiteKind::span, "cross", "other");
  const uint32_t point = writer.define_site(format::SiteKind::instant, "nest", "point");
  writer.set_packet_bytes(200);  // many packets: the streams are read in pieces too
  constexpr uint32_t kUndefined = 999;
  for (uint32_t thread = 1; thread <= 5; ++thread) {
    writer.define_thread(100 + thread, fmt::format("worker {}", thread));
    uint64_t ticks = 1000 * thread;
    auto add = [&](EventId id, uint32_t site, uint64_t step) {
      ticks += step;
      writer.add(100 + thread, id, ticks, {uint64_t{site}});
    };
    if (thread % 2 == 0) add(EventId::span_end, other, 3);  // an end before any begin
    for (uint32_t round = 0; round < 40 + thread * 7; ++round) {
      add(EventId::span_begin, outer, 5);
      add(EventId::span_begin, inner, 7 + round % 3);
      add(EventId::span_begin, leaf, 2);
      add(EventId::instant, point, 1);
      add(EventId::span_end, leaf, round % 4);
      add(EventId::span_begin, other, 3);
      if (round % 5 == 0) {
        add(EventId::span_end, inner, 4);  // crosses "other", which ends after
        add(EventId::span_end, other, 2);
      } else {
        add(EventId::span_end, other, 2);
        add(EventId::span_end, inner, 4);
      }
      if (round % 9 == thread % 9) add(EventId::span_end, leaf, 1);  // nothing of its name open
      add(EventId::span_begin, kUndefined, 1);
      add(EventId::span_end, kUndefined, 3 + thread);
      add(EventId::span_end, outer, round % 11);
    }
    add(EventId::span_begin, outer, 2);  // never ended
    add(EventId::span_begin, inner, 2);
  }
  // The first ends of the trace, at one tick on two threads, unpaired: the first is the lower
  // stream's ("thread-201" before "thread-90"), not the lower thread id's.
  writer.add(90, EventId::span_end, 10, {uint64_t{outer}});
  writer.add(201, EventId::span_end, 10, {uint64_t{inner}});
  writer.write(directory / "trace");
  EXPECT_TRUE(expect_same_profiles(directory / "trace"));
}

// Levels, float levels, metric counters (running totals across threads), gauges and histograms,
// written by several threads, some at the same ticks.
TEST(StatsParallel, CountersOfEveryKind) {
  TemporaryDirectory directory;
  format::TraceWriter writer(crafted_description());
  const uint32_t level = writer.define_site(format::SiteKind::counter, "c", "level");
  const uint32_t level_again = writer.define_site(format::SiteKind::counter, "c", "level");
  const uint32_t requests = writer.define_site(format::SiteKind::metric_counter, "metrics", "requests_total");
  const uint32_t gauge = writer.define_site(format::SiteKind::metric_gauge, "metrics", "in_flight");
  const uint32_t latency = writer.define_site(format::SiteKind::metric_histogram, "metrics", "latency_seconds");
  writer.set_packet_bytes(300);  // many packets: the streams are read in pieces too
  // Thread ids whose order is not their streams' ("thread-1000" comes first).
  for (const uint32_t thread : {7u, 30u, 200u, 1000u}) {
    uint64_t ticks = 500;
    for (uint32_t i = 0; i < 300; ++i) {
      ticks += 10 + (i * thread) % 13;  // the first samples all at one tick
      writer.add(thread, EventId::counter, ticks,
                 {uint64_t{i % 2 ? level : level_again}, uint64_t(i * thread % 97 + thread)});
      writer.add(thread, EventId::counter_float, ticks, {uint64_t{level}, bits(0.1 * i - 3.0 * thread)});
      writer.add(thread, EventId::counter, ticks + 1, {uint64_t{requests}, uint64_t{1 + (i + thread) % 5}});
      writer.add(thread, EventId::counter_float, ticks + 2, {uint64_t{requests}, bits(2.0)});
      writer.add(thread, EventId::counter, ticks + 3, {uint64_t{gauge}, uint64_t(int64_t{50} - i)});
      writer.add(thread, EventId::counter_float, ticks + 4, {uint64_t{latency}, bits(0.001 * (i % 17 + 1) * thread)});
    }
    // And the last ones.
    writer.add(thread, EventId::counter, 100'000, {uint64_t{level}, uint64_t{thread}});
    writer.add(thread, EventId::counter, 100'000, {uint64_t{requests}, uint64_t{thread}});
    writer.add(thread, EventId::counter_float, 100'000, {uint64_t{latency}, bits(thread / 3.0)});
  }
  writer.write(directory / "trace");
  EXPECT_TRUE(expect_same_profiles(directory / "trace"));
}

// Values whose order matters to the result: a NaN, -0, an increment that is not a whole number.
// The threads are then read in the merge, and the result is still the merge's.
TEST(StatsParallel, CounterValuesWhoseOrderMattersAreReadInTheMerge) {
  for (const double odd : {std::numeric_limits<double>::quiet_NaN(), -0.0, 0.5}) {
    TemporaryDirectory directory;
    format::TraceWriter writer(crafted_description());
    const uint32_t level = writer.define_site(format::SiteKind::counter, "c", "level");
    const uint32_t requests = writer.define_site(format::SiteKind::metric_counter, "metrics", "requests_total");
    for (uint32_t thread = 1; thread <= 3; ++thread)
      for (uint32_t i = 0; i < 50; ++i) {
        const uint64_t ticks = 100 + i * 10 + thread;
        const bool odd_one = thread == 2 && i == 20;
        writer.add(thread, EventId::counter_float, ticks, {uint64_t{level}, bits(odd_one && odd != 0.5 ? odd : 0.0)});
        writer.add(thread, EventId::counter_float, ticks,
                   {uint64_t{requests}, bits(odd_one && odd == 0.5 ? odd : 1.0)});
      }
    writer.write(directory / "trace");
    EXPECT_FALSE(expect_same_profiles(directory / "trace")) << odd;
  }
}

TEST(StatsParallel, TasksAndCoroutinesAreReadInTheMerge) {
  TemporaryDirectory directory;
  const Config config = small_packets(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(2, "parallel-pool");
    auto work = [](thread_pool& on) -> task<int> {
      CHRONICLE_SPAN("parallel", "coroutine");
      co_await on.schedule();
      CHRONICLE_COUNTER("parallel", "in coroutine", 1);
      co_return 1;
    };
    for (int i = 0; i < 30; ++i) {
      CHRONICLE_SPAN("parallel", "main loop");
      EXPECT_EQ(sync_wait(work(pool)), 1);
    }
  }
  stop();
  EXPECT_FALSE(expect_same_profiles(config.output)) << "task runs tie the threads together";
}

// One thread's spans in random order: nested to random depths, ended in and out of order, ends
// with no begin, begins never ended, several at one tick, flat runs and deep ones, in packets of
// a few events, so that the pieces the stream is read in start at every kind of place. Each
// seed's profile read in pieces is the merge's.
TEST(StatsParallel, OneThreadReadInPiecesIsReadAsAWhole) {
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    TemporaryDirectory directory;
    format::TraceWriter writer(crafted_description());
    std::vector<uint32_t> sites;
    for (const char* name : {"a", "b", "c", "d", "e"})
      sites.push_back(writer.define_site(format::SiteKind::span, "random", name));
    const uint32_t level = writer.define_site(format::SiteKind::counter, "random", "level");
    writer.set_packet_bytes(96 + seed * 8);
    writer.define_thread(7, "worker");
    std::mt19937 random(seed);
    auto below = [&](uint32_t n) { return static_cast<uint32_t>(random() % n); };
    std::vector<uint32_t> open;
    uint64_t ticks = 1000;
    for (int event = 0; event < 3000; ++event) {
      ticks += below(4);                         // 0: at the same tick as the event before
      const uint32_t phase = (event / 250) % 4;  // 0, 2: mixed; 1: deeper and deeper; 3: ending
      const uint32_t roll = below(100);
      const bool begin = phase == 1 ? roll < 80 : phase == 3 ? roll < 15 : roll < 50;
      if (begin) {
        const uint32_t site = sites[below(static_cast<uint32_t>(sites.size()))];
        writer.add(7, EventId::span_begin, ticks, {uint64_t{site}});
        open.push_back(site);
      } else if (roll % 7 == 0) {
        writer.add(7, EventId::counter, ticks, {uint64_t{level}, uint64_t{roll}});
      } else if (!open.empty() && roll % 5 != 0) {
        // The innermost, or now and then one further down (out of order).
        const size_t index = roll % 3 == 0 ? below(static_cast<uint32_t>(open.size())) : open.size() - 1;
        writer.add(7, EventId::span_end, ticks, {uint64_t{open[index]}});
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(index));
      } else {
        // An end of any name: it may close nothing.
        writer.add(7, EventId::span_end, ticks, {uint64_t{sites[below(static_cast<uint32_t>(sites.size()))]}});
      }
    }
    writer.write(directory / "trace");
    SCOPED_TRACE(fmt::format("seed {}", seed));
    EXPECT_TRUE(expect_same_profiles(directory / "trace"));
    ASSERT_GE(reader::Trace(directory / "trace").readable_packet_count(0), 16u);
  }
}

// A later piece that holds more ends with no begin of its own than it keeps (ThreadPass's
// kMaxDanglingEnds): the thread is read whole, with the same result.
TEST(StatsParallel, APieceOfTooManyDanglingEndsIsReadWhole) {
  TemporaryDirectory directory;
  format::TraceWriter writer(crafted_description());
  const uint32_t site = writer.define_site(format::SiteKind::span, "dangling", "deep");
  writer.set_packet_bytes(4096);
  for (uint64_t i = 0; i < 100; ++i) writer.add(3, EventId::span_begin, 1000 + i, {uint64_t{site}});
  for (uint64_t i = 0; i < 150'000; ++i) writer.add(3, EventId::span_end, 2000 + i, {uint64_t{site}});
  writer.write(directory / "trace");
  const reader::Trace trace(directory / "trace");
  analysis::ProfileOptions merged;
  merged.parallel = false;
  const analysis::Profile expected = analysis::profile_trace(trace, {}, merged);
  analysis::ProfileOptions options;
  options.threads = 2;
  options.pieces = analysis::ProfileOptions::Pieces::always;
  const analysis::Profile profile = analysis::profile_trace(trace, {}, options);
  EXPECT_TRUE(profile.read_in_pieces);
  EXPECT_EQ(describe(profile), describe(expected));
  ASSERT_EQ(expected.spans.size(), 1u);
  EXPECT_EQ(expected.spans[0].duration.count, 100u);
}

// A damaged packet in the middle of a stream: its spans' begins or ends are lost with it.
TEST(StatsParallel, DamagedTrace) {
  TemporaryDirectory directory;
  const std::string trace = record_threads(directory, 3, 2000);
  const std::string stream = stream_files(trace).front();
  int packet = 0;
  edit_packet_headers(stream, [&](format::PacketHeader& header) {
    if (packet++ == 3) header.stream_id = 77;  // not a thread stream: the packet is skipped
  });
  ASSERT_FALSE(reader::Trace(trace).damage().empty());
  EXPECT_TRUE(expect_same_profiles(trace));
}

// A thread id used by two streams (a thread of the process that ended, and a later one given its
// id): one thread, its spans paired across both streams in time order.
TEST(StatsParallel, AThreadIdOfTwoStreams) {
  TemporaryDirectory directory;
  const std::string trace = record_threads(directory, 3, 2000);
  const std::vector<std::string> streams = stream_files(trace);
  ASSERT_GE(streams.size(), 3u);
  uint32_t first_thread = 0;
  edit_packet_headers(streams[0], [&](format::PacketHeader& header) { first_thread = header.thread_id; });
  edit_packet_headers(streams[1], [&](format::PacketHeader& header) { header.thread_id = first_thread; });
  EXPECT_TRUE(expect_same_profiles(trace));
}

// A stream whose packets are out of time order: the merge is then not a sort by time, and the
// threads are read in it.
TEST(StatsParallel, AStreamGoingBackInTimeIsReadInTheMerge) {
  TemporaryDirectory directory;
  const std::string trace = record_threads(directory, 2, 2000);
  const std::string stream = stream_files(trace).front();
  std::vector<uint8_t> bytes(std::filesystem::file_size(stream));
  std::ifstream(stream, std::ios::binary).read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  const size_t packet = reinterpret_cast<const format::PacketHeader*>(bytes.data())->packet_size_bits / 8;
  ASSERT_GE(bytes.size(), 4 * packet);
  std::swap_ranges(bytes.begin() + static_cast<std::ptrdiff_t>(packet),
                   bytes.begin() + static_cast<std::ptrdiff_t>(2 * packet),
                   bytes.begin() + static_cast<std::ptrdiff_t>(2 * packet));
  std::ofstream(stream, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  EXPECT_FALSE(expect_same_profiles(trace));
}

}  // namespace
}  // namespace chronicle
