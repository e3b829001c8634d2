// A damaged packet costs that packet, not the trace: the reader skips it, says what it skipped,
// and reads the rest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chronicle/chronicle.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "format/packet_decoder.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::TemporaryDirectory;

// Where a packet sits in its stream file, and where its events start.
struct PacketPlace {
  uint64_t offset = 0;
  uint64_t size = 0;
  std::vector<uint64_t> event_offsets;  // within the file
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> bytes(std::filesystem::file_size(path));
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  return bytes;
}

// The packets of a sound stream file, walked with the format's own decoder.
std::vector<PacketPlace> packets_of(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  std::vector<PacketPlace> packets;
  uint64_t offset = 0;
  while (offset < bytes.size()) {
    const auto& header = *reinterpret_cast<const format::PacketHeader*>(bytes.data() + offset);
    PacketPlace packet;
    packet.offset = offset;
    packet.size = header.packet_size_bits / 8;
    format::PacketDecoder decoder(bytes.data() + offset, format::content_bytes(header));
    format::RawEvent event;
    while (decoder.next(event)) packet.event_offsets.push_back(offset + event.offset);
    packets.push_back(packet);
    offset += packet.size;
  }
  return packets;
}

void overwrite(const std::string& path, uint64_t offset, const void* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, data, size, static_cast<off_t>(offset)), static_cast<ssize_t>(size));
  ::close(fd);
}

// Two threads' counters and notes in 4 KiB packets: a few dozen packets per stream file.
class Damage : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.output = directory_ / "trace";
    config.shm_dir = directory_.path();
    config.buffer_size = 4 << 20;  // room for everything: no drops
    config.packet_size = 4 << 10;
    config.self_stats_interval = std::chrono::milliseconds(0);  // the two writers' streams only
    ASSERT_TRUE(start(config)) << last_error();
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([] {
        for (int i = 0; i < 5'000; ++i) {
          CHRONICLE_COUNTER("damage", "sequence", i);
          if (i % 50 == 0) CHRONICLE_NOTE("damage", "at {}", i);
        }
      });
    for (auto& thread : threads) thread.join();
    stop();
    trace_ = config.output;
    const reader::Trace sound(trace_);
    ASSERT_EQ(sound.events_discarded(), 0u);
    ASSERT_EQ(sound.streams().size(), 2u);
    total_events_ = test::read_all(sound).size();
    ASSERT_EQ(total_events_, 2u * (5'000 + 100));
    stream_ = sound.streams()[0].path;
    packets_ = packets_of(stream_);
    ASSERT_GE(packets_.size(), 8u) << "the test wants many packets per stream";
  }

  // Events in the packets of the damaged stream from `first` on.
  size_t events_from(size_t first) const {
    size_t events = 0;
    for (size_t i = first; i < packets_.size(); ++i) events += packets_[i].event_offsets.size();
    return events;
  }

  TemporaryDirectory directory_;
  std::string trace_;
  std::string stream_;
  std::vector<PacketPlace> packets_;
  size_t total_events_ = 0;
};

TEST_F(Damage, AnUnknownEventIdCostsOnlyItsPacket) {
  const PacketPlace& victim = packets_[packets_.size() / 2];
  const uint64_t event_offset = victim.event_offsets[victim.event_offsets.size() / 2];
  ASSERT_TRUE(test::write_unknown_event(stream_, event_offset));

  const reader::Trace trace(trace_);
  EXPECT_EQ(test::read_all(trace).size(), total_events_ - victim.event_offsets.size());
  size_t in_stream = 0;
  trace.for_each_in_stream(0, [&](const reader::Event&) { return ++in_stream, true; });
  EXPECT_EQ(in_stream, events_from(0) - victim.event_offsets.size());
  ASSERT_EQ(trace.damage().size(), 1u);
  const reader::Damage& damage = trace.damage()[0];
  EXPECT_EQ(damage.file, stream_);
  EXPECT_EQ(damage.offset, victim.offset);
  EXPECT_EQ(damage.bytes, victim.size);
  EXPECT_FALSE(damage.events_lost.has_value()) << "a packet that does not decode has no count";
  EXPECT_NE(damage.reason.find("unknown event id 99"), std::string::npos) << damage.reason;
  EXPECT_NE(damage.reason.find(std::to_string(event_offset)), std::string::npos) << damage.reason;
}

TEST_F(Damage, AForeignUuidCostsOnlyItsPacketWhoseEventsAreCounted) {
  const PacketPlace& victim = packets_[1];
  const uint8_t foreign = 0xee;
  overwrite(stream_, victim.offset + offsetof(format::PacketHeader, uuid), &foreign, 1);

  const reader::Trace trace(trace_);
  EXPECT_EQ(test::read_all(trace).size(), total_events_ - victim.event_offsets.size());
  ASSERT_EQ(trace.damage().size(), 1u);
  EXPECT_EQ(trace.damage()[0].offset, victim.offset);
  EXPECT_EQ(trace.damage()[0].events_lost, victim.event_offsets.size());
  EXPECT_NE(trace.damage()[0].reason.find("uuid"), std::string::npos) << trace.damage()[0].reason;
}

// A packet size that frames nothing: the rest of the file cannot be found, so it is all skipped.
void expect_rest_of_file_skipped(const std::string& trace_path, const std::string& stream, const PacketPlace& victim,
                                 size_t events_left, const std::string& words) {
  const reader::Trace trace(trace_path);
  EXPECT_EQ(test::read_all(trace).size(), events_left);
  ASSERT_EQ(trace.damage().size(), 1u);
  const reader::Damage& damage = trace.damage()[0];
  EXPECT_EQ(damage.file, stream);
  EXPECT_EQ(damage.offset, victim.offset);
  EXPECT_EQ(damage.bytes, std::filesystem::file_size(stream) - victim.offset);
  EXPECT_NE(damage.reason.find(words), std::string::npos) << damage.reason;
}

TEST_F(Damage, APacketSizeOfZeroSkipsTheRestOfTheFile) {
  const size_t index = packets_.size() / 2;
  const uint64_t zero = 0;
  overwrite(stream_, packets_[index].offset + offsetof(format::PacketHeader, packet_size_bits), &zero, 8);
  expect_rest_of_file_skipped(trace_, stream_, packets_[index], total_events_ - events_from(index), "content size");
}

TEST_F(Damage, APacketSizePastTheEndSkipsTheRestOfTheFile) {
  const size_t index = packets_.size() / 2;
  const uint64_t huge = uint64_t{1} << 50;
  overwrite(stream_, packets_[index].offset + offsetof(format::PacketHeader, packet_size_bits), &huge, 8);
  expect_rest_of_file_skipped(trace_, stream_, packets_[index], total_events_ - events_from(index),
                              "runs past the end");
}

TEST_F(Damage, ABadMagicSkipsTheRestOfTheFile) {
  const size_t index = 2;
  const uint32_t magic = 0xdeadbeef;
  overwrite(stream_, packets_[index].offset, &magic, 4);
  expect_rest_of_file_skipped(trace_, stream_, packets_[index], total_events_ - events_from(index), "bad packet magic");
}

TEST_F(Damage, ATruncatedLastPacketIsSkipped) {
  std::filesystem::resize_file(stream_, std::filesystem::file_size(stream_) - 7);
  expect_rest_of_file_skipped(trace_, stream_, packets_.back(), total_events_ - packets_.back().event_offsets.size(),
                              "runs past the end");
}

TEST_F(Damage, AStreamThatIsAllGarbageIsSkippedWhileOthersRemain) {
  const std::vector<uint8_t> garbage(std::filesystem::file_size(stream_), 'x');
  overwrite(stream_, 0, garbage.data(), garbage.size());
  const reader::Trace trace(trace_);
  EXPECT_EQ(trace.streams().size(), 1u) << "a stream with nothing readable is left out";
  EXPECT_EQ(test::read_all(trace).size(), total_events_ - events_from(0));
  ASSERT_EQ(trace.damage().size(), 1u);
  EXPECT_EQ(trace.damage()[0].offset, 0u);
  EXPECT_EQ(trace.damage()[0].bytes, garbage.size());
}

TEST_F(Damage, NothingReadableLeftIsAnError) {
  const reader::Trace sound(trace_);
  for (const auto& stream : sound.streams()) {
    const std::vector<uint8_t> garbage(std::filesystem::file_size(stream.path), 'x');
    overwrite(stream.path, 0, garbage.data(), garbage.size());
  }
  try {
    const reader::Trace trace(trace_);
    FAIL() << "a trace with no readable packet opened";
  } catch (const reader::TraceError& error) {
    EXPECT_NE(std::string(error.what()).find("bad packet magic"), std::string::npos) << error.what();
  }
}

// The reader checks packets at open with format::events_decode, a walk that builds no events;
// the cursors then read them with the decoder. The two must agree on every packet, damaged or
// not, or a cursor would meet a fault after handing out part of a packet (or a sound packet
// would be skipped). Thousands of damaged copies of real packets: a byte changed, or the content
// cut anywhere.
TEST_F(Damage, TheCheckAtOpenAgreesWithTheDecoderOnEveryDamagedPacket) {
  const std::vector<uint8_t> bytes = read_file(stream_);
  std::mt19937 random(13);
  auto decoder_verdict = [](const uint8_t* packet, size_t content, uint32_t& types) {
    try {
      format::PacketDecoder decoder(packet, content);
      format::RawEvent event;
      while (decoder.next(event)) types |= format::read_type_bits(*event.spec);  // a compound: its parts too
      return true;
    } catch (const format::DecodeError&) {
      return false;
    }
  };
  size_t sound = 0, damaged = 0;
  for (const PacketPlace& place : packets_) {
    const uint64_t content =
        format::content_bytes(*reinterpret_cast<const format::PacketHeader*>(&bytes[place.offset]));
    for (int trial = 0; trial < 400; ++trial) {
      // 8-byte aligned like a mapped packet, and the header's own fields left alone.
      std::vector<uint64_t> storage(place.size / 8);
      auto* packet = reinterpret_cast<uint8_t*>(storage.data());
      std::memcpy(packet, &bytes[place.offset], place.size);
      size_t checked = content;
      if (trial % 4 == 3) {
        checked = std::uniform_int_distribution<size_t>(format::kPacketHeaderSize, content)(random);
      } else {
        const size_t at = std::uniform_int_distribution<size_t>(format::kPacketHeaderSize, content - 1)(random);
        packet[at] = static_cast<uint8_t>(random());
      }
      uint32_t decoded_types = 0, checked_types = 0;
      const bool decodes = decoder_verdict(packet, checked, decoded_types);
      ASSERT_EQ(format::events_decode(packet, checked, checked_types), decodes)
          << "packet at " << place.offset << ", trial " << trial;
      if (decodes) {
        EXPECT_EQ(checked_types, decoded_types);
      }
      ++(decodes ? sound : damaged);
    }
  }
  EXPECT_GT(sound, 100u);
  EXPECT_GT(damaged, 100u);
}

// A trace read while the collector writes it: the collector cuts back a packet it failed to write
// (a full disk), so a reader mapping more than the committed packets would fault (SIGBUS) on the
// cut pages. Reading within the committed sizes, the cut costs nothing.
TEST_F(Damage, AReadWithinTheCommittedSizesSurvivesACutBackAfterIt) {
  const size_t kept = packets_.size() / 2;
  const uint64_t committed_bytes = packets_[kept].offset;  // a page boundary: 4 KiB packets
  const std::string name = std::filesystem::path(stream_).filename().string();
  const reader::Trace open_before_the_cut(trace_, {}, reader::CommittedFiles{{{name, committed_bytes}}, ""});
  ASSERT_EQ(open_before_the_cut.streams().size(), 1u) << "a stream file it was not told of is not read";
  ASSERT_EQ(::truncate(stream_.c_str(), static_cast<off_t>(committed_bytes)), 0);
  EXPECT_EQ(test::read_all(open_before_the_cut).size(), total_events_ / 2 - events_from(kept));
}

// A session writing 64 KiB packets into rings with room for everything: no drops.
Config large_trace_config(const TemporaryDirectory& directory) {
  Config config;
  config.output = directory / "trace";
  config.shm_dir = directory.path();
  config.buffer_size = 64 << 20;
  config.packet_size = 64 << 10;
  config.self_stats_interval = std::chrono::milliseconds(0);
  return config;
}

// A trace large enough to be checked on several threads when it is opened
// (reader::kBytesForThreadedOpen): what it says of its streams and of their damage is what one
// thread would say, in the same order, whichever stream a thread finished first.
TEST(DamageOnThreads, ALargeTraceSaysWhatOneThreadWouldInTheSameOrder) {
  TemporaryDirectory directory;
  const Config config = large_trace_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  // Streams of different sizes, so that the threads do not finish in the order of the names.
  constexpr int kThreads = 4;
  constexpr int kRounds[kThreads] = {600'000, 150'000, 450'000, 100'000};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([rounds = kRounds[t]] {
      for (int i = 0; i < rounds; ++i) CHRONICLE_COUNTER("damage", "sequence", i);
    });
  for (auto& thread : threads) thread.join();
  stop();
  const std::string trace_path = config.output;

  std::vector<std::string> streams;
  uint64_t total_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(trace_path))
    if (entry.path().filename().string().starts_with("thread-") && entry.file_size() > 0) {
      streams.push_back(entry.path().string());
      total_bytes += entry.file_size();
    }
  std::sort(streams.begin(), streams.end());
  ASSERT_EQ(streams.size(), size_t{kThreads});
  ASSERT_GE(total_bytes, reader::kBytesForThreadedOpen) << "the test wants a trace that is opened on threads";
  size_t sound_events = 0;
  {
    const reader::Trace sound(trace_path);
    ASSERT_EQ(sound.events_discarded(), 0u);
    sound_events = test::read_all(sound).size();
  }

  // An unknown event id in a packet of the first stream and of the third; a bad magic in the
  // last packet of the fourth: three damages, in the order of the stream names.
  const std::vector<PacketPlace> first = packets_of(streams[0]);
  const std::vector<PacketPlace> third = packets_of(streams[2]);
  const std::vector<PacketPlace> fourth = packets_of(streams[3]);
  const auto break_event = [](const std::string& path, const PacketPlace& victim) {
    ASSERT_TRUE(test::write_unknown_event(path, victim.event_offsets.front()));
  };
  break_event(streams[0], first[first.size() / 2]);
  break_event(streams[2], third[1]);
  const uint32_t bad_magic = 0;
  overwrite(streams[3], fourth.back().offset, &bad_magic, sizeof bad_magic);

  const reader::Trace trace(trace_path);
  ASSERT_EQ(trace.streams().size(), size_t{kThreads});
  for (size_t s = 0; s < streams.size(); ++s) EXPECT_EQ(trace.streams()[s].path, streams[s]);
  ASSERT_EQ(trace.damage().size(), 3u);
  EXPECT_EQ(trace.damage()[0].file, streams[0]);
  EXPECT_EQ(trace.damage()[0].offset, first[first.size() / 2].offset);
  EXPECT_EQ(trace.damage()[1].file, streams[2]);
  EXPECT_EQ(trace.damage()[1].offset, third[1].offset);
  EXPECT_EQ(trace.damage()[2].file, streams[3]);
  EXPECT_EQ(trace.damage()[2].offset, fourth.back().offset);
  EXPECT_EQ(test::read_all(trace).size(), sound_events - first[first.size() / 2].event_offsets.size() -
                                              third[1].event_offsets.size() - fourth.back().event_offsets.size());
}

// One stream large enough to be checked in several windows, its packets on threads: the damage
// is what one thread finds, in the order of the file, each packet's discard count compared with
// the sound packet before it.
size_t event_count(const reader::Trace& trace) {
  size_t events = 0;
  for (size_t stream = 0; stream < trace.streams().size(); ++stream)
    trace.for_each_in_stream(stream, [&events](const reader::Event&) { return ++events > 0; });
  return events;
}

TEST(DamageOnThreads, OneLargeStreamIsCheckedOnThreadsAsOneThreadWould) {
  TemporaryDirectory directory;
  const Config config = large_trace_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 2'500'000; ++i) CHRONICLE_COUNTER("damage", "sequence", i);
  stop();
  std::string stream;
  for (const auto& entry : std::filesystem::directory_iterator(config.output))
    if (entry.path().filename().string().starts_with("thread-")) stream = entry.path().string();
  ASSERT_FALSE(stream.empty());
  ASSERT_GE(std::filesystem::file_size(stream), 2 * reader::kBytesForThreadedOpen)
      << "the test wants a stream checked on threads, in more than one window";
  size_t sound_events = 0;
  {
    const reader::Trace sound(config.output);
    ASSERT_EQ(sound.events_discarded(), 0u);
    sound_events = event_count(sound);
  }

  // An unknown event id early and another late; a discard count of 1000 in the packet before
  // the last, so that the last (0) decreases.
  const std::vector<PacketPlace> packets = packets_of(stream);
  ASSERT_GE(packets.size(), 8u);
  const std::vector<size_t> broken = {3, packets.size() * 3 / 4};
  for (const size_t k : broken) ASSERT_TRUE(test::write_unknown_event(stream, packets[k].event_offsets.front()));
  const uint64_t discarded = 1000;
  overwrite(stream, packets[packets.size() - 2].offset + offsetof(format::PacketHeader, events_discarded), &discarded,
            sizeof discarded);

  const reader::Trace trace(config.output);
  ASSERT_EQ(trace.damage().size(), 3u);
  EXPECT_EQ(trace.damage()[0].offset, packets[broken[0]].offset);
  EXPECT_EQ(trace.damage()[1].offset, packets[broken[1]].offset);
  EXPECT_EQ(trace.damage()[2].offset, packets.back().offset);
  EXPECT_NE(trace.damage()[2].reason.find("events_discarded decreases"), std::string::npos) << trace.damage()[2].reason;
  EXPECT_EQ(trace.events_discarded(), discarded);
  EXPECT_EQ(event_count(trace), sound_events - packets[broken[0]].event_offsets.size() -
                                    packets[broken[1]].event_offsets.size() - packets.back().event_offsets.size());
}

}  // namespace
}  // namespace chronicle
