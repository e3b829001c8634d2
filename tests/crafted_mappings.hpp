// Small, sound mappings written field by field, as a recorder or a metrics registry would leave
// them: the tests corrupt one field at a time, and their bytes are the fuzz targets' seeds.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "chronicle/detail/layout.hpp"
#include "chronicle/detail/metrics_layout.hpp"

namespace chronicle::test {

// Two channels of four 1 KiB slots; channel 0 has closed packet 0 and holds packet 1 open.
struct CraftedSession {
  static constexpr uint32_t kPacketSize = 1024;
  static constexpr uint32_t kSlots = 4;
  static constexpr uint32_t kChannels = 2;
  static constexpr uint64_t kCategories = format::kShmHeaderSize;
  static constexpr uint64_t kTable = kCategories + format::kCategoryTableSize;
  static constexpr uint64_t kStrings = kTable + kChannels * sizeof(format::ChannelDescriptor);
  static constexpr uint64_t kStringsSize = 1024;
  static constexpr uint64_t kRings = kStrings + kStringsSize;
  static constexpr uint64_t kRingsSize = uint64_t{kChannels} * kSlots * kPacketSize;
  static constexpr uint64_t kCounts = kRings + kRingsSize;
  static constexpr uint64_t kCategoryRows = kCounts + uint64_t{kChannels} * kSlots * 4;
  static constexpr uint64_t kSize = kCategoryRows + uint64_t{kChannels} * format::kCategoryCountsRowSize;

  std::vector<uint8_t> bytes = std::vector<uint8_t>(kSize);

  explicit CraftedSession(int32_t pid = 4242, const char* process_name = "crafted") {
    auto& h = *new (bytes.data()) format::ShmHeader{};
    h.magic = format::kShmMagic;
    h.version = format::kShmVersion;
    h.header_size = format::kShmHeaderSize;
    h.uuid[0] = 1;
    h.pid = pid;
    h.policy = format::BufferPolicy::flight;
    std::strncpy(h.process_name, process_name, sizeof h.process_name - 1);
    std::strncpy(h.hostname, "crafted-host", sizeof h.hostname - 1);
    h.clock = {1'000'000'000, 1000, 1000, 1'700'000'000'000'000'000, 0, 0};
    h.packet_size = kPacketSize;
    h.packets_per_channel = kSlots;
    h.max_channels = kChannels;
    h.categories_offset = kCategories;
    h.channel_table_offset = kTable;
    h.strings_offset = kStrings;
    h.strings_size = kStringsSize;
    h.rings_offset = kRings;
    h.packet_events_offset = kCounts;
    h.category_counts_offset = kCategoryRows;
    h.file_size = kSize;
    h.channel_count.store(1);
    h.state.store(static_cast<uint32_t>(format::SessionState::running));
    for (uint32_t index = 0; index < kChannels; ++index) new (&channel(index)) format::ChannelDescriptor{};
    channel(0).state.store(static_cast<uint32_t>(format::ChannelState::active));
    channel(0).thread_id = 4243;
    channel(0).packets_committed.store(1);
    packet(bytes.data() + kStrings, format::kStreamStrings, 0, kStringsSize);
    for (uint64_t seq = 0; seq < 2; ++seq)
      packet(bytes.data() + kRings + seq * kPacketSize, format::kStreamThread, seq, kPacketSize);
  }

  format::ShmHeader& header() { return *reinterpret_cast<format::ShmHeader*>(bytes.data()); }
  format::ChannelDescriptor& channel(uint32_t index) {
    return reinterpret_cast<format::ChannelDescriptor*>(bytes.data() + kTable)[index];
  }
  format::PacketHeader& strings() { return *reinterpret_cast<format::PacketHeader*>(bytes.data() + kStrings); }

 private:
  void packet(uint8_t* at, uint32_t stream, uint64_t seq, uint64_t size) {
    auto& p = *new (at) format::PacketHeader{};
    p.magic = format::kPacketMagic;
    p.uuid[0] = 1;
    p.stream_id = stream;
    p.stream_instance_id = 0;
    p.timestamp_begin = 1000 + seq;
    p.timestamp_end.store(1000 + seq);
    p.content_size_bits.store(format::kPacketHeaderSize * 8);
    p.packet_size_bits = size * 8;
    p.packet_seq_num.store(seq);
    p.thread_id = 4243;
    p.pid = 4242;
  }
};

// Four directory entries, two shards of 64 cells; one counter (requests_total) in cells 2.
struct CraftedMetrics {
  static constexpr uint32_t kMaxMetrics = 4;
  static constexpr uint32_t kShards = 2;
  static constexpr uint32_t kCells = 64;
  static constexpr uint32_t kShardSize = sizeof(format::ShardHeader) + kCells * 8;
  static constexpr uint64_t kDirectory = format::kMetricsHeaderSize;
  static constexpr uint64_t kShardsOffset = kDirectory + kMaxMetrics * sizeof(format::MetricEntry);
  static constexpr uint64_t kSize = kShardsOffset + uint64_t{kShards} * kShardSize;

  std::vector<uint8_t> bytes = std::vector<uint8_t>(kSize);

  explicit CraftedMetrics(int32_t pid = 4242) {
    auto& h = *new (bytes.data()) format::MetricsHeader{};
    h.magic = format::kMetricsMagic;
    h.version = format::kMetricsVersion;
    h.header_size = format::kMetricsHeaderSize;
    h.pid = pid;
    h.entry_size = sizeof(format::MetricEntry);
    std::strncpy(h.process_name, "crafted", sizeof h.process_name - 1);
    h.directory_offset = kDirectory;
    h.shards_offset = kShardsOffset;
    h.file_size = kSize;
    h.max_metrics = kMaxMetrics;
    h.max_shards = kShards;
    h.shard_size = kShardSize;
    h.cells_per_shard = kCells;
    h.metric_count.store(1);
    h.shard_count.store(1);
    h.cells_used.store(3);
    for (uint32_t index = 0; index < kMaxMetrics; ++index) new (&entry(index)) format::MetricEntry{};
    format::MetricEntry& counter = entry(0);
    counter.kind = format::MetricKind::counter;
    counter.first_cell = 2;
    counter.cell_count = 1;
    std::strncpy(counter.name, "requests_total", sizeof counter.name - 1);
    counter.state.store(static_cast<uint32_t>(format::MetricEntryState::ready));
    for (uint32_t shard = 0; shard < kShards; ++shard)
      new (bytes.data() + kShardsOffset + uint64_t{shard} * kShardSize) format::ShardHeader{};
    cell(0, 2) = 7;
  }

  format::MetricsHeader& header() { return *reinterpret_cast<format::MetricsHeader*>(bytes.data()); }
  format::MetricEntry& entry(uint32_t index) {
    return reinterpret_cast<format::MetricEntry*>(bytes.data() + kDirectory)[index];
  }
  uint64_t& cell(uint32_t shard, uint32_t index) {
    return reinterpret_cast<uint64_t*>(bytes.data() + kShardsOffset + uint64_t{shard} * kShardSize +
                                       sizeof(format::ShardHeader))[index];
  }
};

}  // namespace chronicle::test
