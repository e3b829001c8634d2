// The tools against mappings they did not make: crafted session and metrics mappings whose sizes
// and offsets wrap when added, files another user planted where a process's mappings are looked
// for, and a session name taken before the session could use it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chronicle/chronicle.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "crafted_mappings.hpp"
#include "shm/mapping_check.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::CraftedMetrics;
using test::CraftedSession;
using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
// A hang is a failure too: every command gets a minute, far more than a tiny mapping needs.
const std::string kBounded = "timeout 60 " + kCli;

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// `with_offset`: the offset the message must name.
void expect_refused_as_bad_input(const test::CommandResult& result, const std::string& field, uint64_t with_offset) {
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find(field), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(fmt::format("offset {})", with_offset)), std::string::npos) << result.err;
}

test::CommandResult snapshot_file(const TemporaryDirectory& directory, const CraftedSession& session) {
  write_bytes(directory / "crafted.shm", session.bytes);
  return run(kBounded + " snapshot " + (directory / "crafted.shm") + " -o " + (directory / "out"));
}

// Sums and products that wrap fail on the field they come from, even where a file small enough
// for a test cannot reach them through a whole mapping.
TEST(MappingCheck, SumsAndProductsThatWrapFailOnTheirField) {
  const shm::MappingCheck check("test.shm", "session", 1 << 20);
  auto field_of = [](const std::function<void()>& call) -> std::pair<std::string, uint64_t> {
    try {
      call();
    } catch (const shm::MappingError& error) {
      EXPECT_NE(std::string(error.what()).find("test.shm: not a readable chronicle session: "), std::string::npos);
      return {error.field(), error.offset()};
    }
    return {"(accepted)", 0};
  };
  EXPECT_EQ(field_of([&] { check.product("max_channels", 332, uint64_t{1} << 33, uint64_t{1} << 31); }),
            std::make_pair(std::string("max_channels"), uint64_t{332}));
  EXPECT_EQ(field_of([&] {
              check.region({"strings_offset", 8}, 4096, {"strings_size", 16}, ~uint64_t{0} - 100, 0);
            }),
            std::make_pair(std::string("strings_size"), uint64_t{16}));
  EXPECT_EQ(field_of([&] {
              check.region({"rings_offset", 24}, ~uint64_t{0} - 100, {"max_channels", 32}, 200, 0);
            }),
            std::make_pair(std::string("rings_offset"), uint64_t{24}));
  EXPECT_EQ(field_of([&] {
              check.region({"rings_offset", 24}, 4100, {"max_channels", 32}, 64, 0, 8);
            }),
            std::make_pair(std::string("rings_offset"), uint64_t{24}));  // not aligned
  EXPECT_EQ(check.product("max_channels", 332, uint64_t{1} << 32, uint64_t{1} << 31), uint64_t{1} << 63);
  EXPECT_EQ(check.region({"rings_offset", 24}, 4096, {"max_channels", 32}, (1 << 20) - 4096, 4096, 8), 1u << 20);
}

TEST(HostileSessionMapping, SoundCraftedMappingIsRead) {
  TemporaryDirectory directory;
  const auto result = snapshot_file(directory, CraftedSession());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  reader::Trace trace(directory / "out");
  ASSERT_EQ(trace.streams().size(), 1u);
  EXPECT_EQ(trace.streams()[0].packets, 2u);
  EXPECT_EQ(trace.streams()[0].thread_id, 4243u);
  EXPECT_TRUE(trace.damage().empty());
}

TEST(HostileSessionMapping, ACategoryTablePastTheEndIsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  session.header().categories_offset = CraftedSession::kSize - 64;
  expect_refused_as_bad_input(snapshot_file(directory, session), "categories_offset",
                              offsetof(format::ShmHeader, categories_offset));
}

TEST(HostileSessionMapping, CategoryCountsPastTheEndAreRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  session.header().category_counts_offset = CraftedSession::kSize + 64;
  expect_refused_as_bad_input(snapshot_file(directory, session), "category_counts_offset",
                              offsetof(format::ShmHeader, category_counts_offset));
}

TEST(HostileSessionMapping, ChannelTableOffsetWrappingPastTheEndIsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  // offset + max_channels * 192 wraps around to 0: the table would start 384 bytes before the file.
  session.header().channel_table_offset = 0 - uint64_t{CraftedSession::kChannels} * 192;
  expect_refused_as_bad_input(snapshot_file(directory, session), "channel_table_offset",
                              offsetof(format::ShmHeader, channel_table_offset));
}

TEST(HostileSessionMapping, RingsOffsetWrappingPastTheEndIsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  // Below the rings' size: offset + size wraps around to where the sound rings begin.
  session.header().rings_offset = CraftedSession::kRings - CraftedSession::kRingsSize;
  expect_refused_as_bad_input(snapshot_file(directory, session), "rings_offset",
                              offsetof(format::ShmHeader, rings_offset));
}

TEST(HostileSessionMapping, RingSizeOfTwoToTheSixtyFourIsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  format::ShmHeader& header = session.header();
  // 4 channels x 2^31 slots x 2^31 bytes = 2^64: the product wraps to 0.
  header.max_channels = 4;
  header.packets_per_channel = 1u << 31;
  header.packet_size = 1u << 31;
  header.channel_table_offset = CraftedSession::kStrings - 4 * sizeof(format::ChannelDescriptor);
  header.packet_events_offset = CraftedSession::kCounts - (uint64_t{4} << 31) * 4;  // its counts wrap as well
  // A slot larger than the whole file is the first thing wrong (before a bad_alloc of 2^62 bytes).
  expect_refused_as_bad_input(snapshot_file(directory, session), "packet_size",
                              offsetof(format::ShmHeader, packet_size));
}

TEST(HostileSessionMapping, StringsSizeWrappingPastTheEndIsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  session.header().strings_size = 0 - CraftedSession::kStrings;  // strings_offset + strings_size wraps to 0
  session.strings().content_size_bits.store(uint64_t{1} << 40);
  expect_refused_as_bad_input(snapshot_file(directory, session), "strings_size",
                              offsetof(format::ShmHeader, strings_size));
}

TEST(HostileSessionMapping, PacketsCommittedNearTwoToTheSixtyFourIsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  session.channel(0).packets_committed.store(~uint64_t{0});
  expect_refused_as_bad_input(snapshot_file(directory, session), "packets_committed",
                              CraftedSession::kTable + offsetof(format::ChannelDescriptor, packets_committed));
}

TEST(HostileSessionMapping, ClockWhoseTickZeroIsPast2262IsRefused) {
  TemporaryDirectory directory;
  CraftedSession session;
  // Nanoseconds since 1970 no int64 holds: the trace's clock offset would overflow in readers.
  session.header().clock.realtime_ns_at_start = ~uint64_t{0};
  expect_refused_as_bad_input(
      snapshot_file(directory, session), "clock.realtime_ns_at_start",
      offsetof(format::ShmHeader, clock) + offsetof(format::ClockCalibration, realtime_ns_at_start));
}

// ---- metrics ----------------------------------------------------------------------------------

// `metrics show` of this test's own pid, its mapping being the crafted one.
test::CommandResult show_metrics(const TemporaryDirectory& directory, const CraftedMetrics& metrics) {
  write_bytes(directory / fmt::format("chronicle-metrics-{}.shm", getpid()), metrics.bytes);
  return run("CHRONICLE_METRICS_DIR=" + directory.path() + " " + kBounded + " metrics show " +
             std::to_string(getpid()));
}

TEST(HostileMetricsMapping, SoundCraftedMappingIsRead) {
  TemporaryDirectory directory;
  const auto result = show_metrics(directory, CraftedMetrics(getpid()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("requests_total 7"), std::string::npos) << result.out;
}

TEST(HostileMetricsMapping, FirstCellWrappingAThirtyTwoBitSumIsRefused) {
  TemporaryDirectory directory;
  CraftedMetrics metrics(getpid());
  metrics.entry(0).first_cell = 0xFFFFFFFF;  // + cell_count 1 = 0 in 32 bits
  expect_refused_as_bad_input(show_metrics(directory, metrics), "first_cell",
                              CraftedMetrics::kDirectory + offsetof(format::MetricEntry, first_cell));
}

TEST(HostileMetricsMapping, ServeRefusesAMalformedEntryBeforeServing) {
  TemporaryDirectory directory;
  CraftedMetrics metrics(getpid());
  metrics.entry(0).first_cell = 0xFFFFFFFF;
  write_bytes(directory / fmt::format("chronicle-metrics-{}.shm", getpid()), metrics.bytes);
  // Serving would go on until stopped: the limit is short, the refusal immediate.
  const auto result = run("CHRONICLE_METRICS_DIR=" + directory.path() + " timeout 20 " + kCli +
                          " metrics serve --port 0 " + std::to_string(getpid()));
  expect_refused_as_bad_input(result, "first_cell",
                              CraftedMetrics::kDirectory + offsetof(format::MetricEntry, first_cell));
}

// A mapping of the same user may hold a name or label key the registry refuses: read as it is,
// its bytes would be lines of their own in `metrics show` and /metrics. The reader applies the
// registry's rule and refuses the mapping, naming the entry's field.
TEST(HostileMetricsMapping, ANameOrLabelKeyTheRegistryRefusesIsRefused) {
  const std::string injected = "x{a=\"1\"} 999\n# TYPE y counter\ny";
  {
    TemporaryDirectory directory;
    CraftedMetrics metrics(getpid());
    std::strncpy(metrics.entry(0).name, injected.c_str(), sizeof metrics.entry(0).name - 1);
    const auto result = show_metrics(directory, metrics);
    EXPECT_EQ(result.out.find("\n# TYPE y counter"), std::string::npos) << result.out;
    expect_refused_as_bad_input(result, "entries[0].name",
                                CraftedMetrics::kDirectory + offsetof(format::MetricEntry, name));
  }
  {
    TemporaryDirectory directory;
    CraftedMetrics metrics(getpid());
    const std::string labels = injected + "\x1f" + "v" + "\x1e";
    std::strncpy(metrics.entry(0).labels, labels.c_str(), sizeof metrics.entry(0).labels - 1);
    const auto result = show_metrics(directory, metrics);
    EXPECT_EQ(result.out.find("\n# TYPE y counter"), std::string::npos) << result.out;
    expect_refused_as_bad_input(result, "entries[0].labels",
                                CraftedMetrics::kDirectory + offsetof(format::MetricEntry, labels));
  }
}

// A sound mapping of `count` entries, all the counter dup_total{k="v"}: the registry never
// writes one (name, labels) twice, a crafted mapping may.
std::vector<uint8_t> duplicated_metrics(uint32_t count) {
  constexpr uint32_t kCells = 64;
  constexpr uint32_t kShardSize = sizeof(format::ShardHeader) + kCells * 8;
  const uint64_t directory = format::kMetricsHeaderSize;
  const uint64_t shards = directory + uint64_t{count} * sizeof(format::MetricEntry);
  std::vector<uint8_t> bytes(shards + kShardSize);
  auto& h = *new (bytes.data()) format::MetricsHeader{};
  h.magic = format::kMetricsMagic;
  h.version = format::kMetricsVersion;
  h.header_size = format::kMetricsHeaderSize;
  h.pid = getpid();
  h.entry_size = sizeof(format::MetricEntry);
  h.directory_offset = directory;
  h.shards_offset = shards;
  h.file_size = bytes.size();
  h.max_metrics = count;
  h.max_shards = 1;
  h.shard_size = kShardSize;
  h.cells_per_shard = kCells;
  h.metric_count.store(count);
  h.shard_count.store(1);
  h.cells_used.store(3);
  const std::string labels = std::string("k") + format::kLabelKeyEnd + "v" + format::kLabelEnd;
  for (uint32_t index = 0; index < count; ++index) {
    auto& entry = *new (bytes.data() + directory + uint64_t{index} * sizeof(format::MetricEntry)) format::MetricEntry{};
    entry.kind = format::MetricKind::counter;
    entry.first_cell = 2;
    entry.cell_count = 1;
    std::strncpy(entry.name, "dup_total", sizeof entry.name - 1);
    std::strncpy(entry.labels, labels.c_str(), sizeof entry.labels - 1);
    entry.state.store(static_cast<uint32_t>(format::MetricEntryState::ready));
  }
  new (bytes.data() + shards) format::ShardHeader{};
  return bytes;
}

// `top --once` pairs each series with its earlier value: with N copies of one series that took
// N^3 steps (2,048 copies: over a minute). 20,000 copies finish well within the limit only when
// the pairing is linear. (CHRONICLE_TEST_DUPLICATES sets another count, to measure.)
TEST(HostileMetricsMapping, TopOnManyCopiesOfOneSeriesIsLinear) {
  TemporaryDirectory directory;
  const char* asked = std::getenv("CHRONICLE_TEST_DUPLICATES");
  const uint32_t count = asked ? static_cast<uint32_t>(std::stoul(asked)) : 20'000;
  write_bytes(directory / fmt::format("chronicle-metrics-{}.shm", getpid()), duplicated_metrics(count));
  const auto result =
      run("CHRONICLE_METRICS_DIR=" + directory.path() + " " + kBounded + " top --once " + std::to_string(getpid()));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find(fmt::format("{} metrics", count)), std::string::npos) << result.out.substr(0, 2000);
  EXPECT_NE(result.out.find("dup_total{k=\"v\"}"), std::string::npos) << result.out.substr(0, 2000);
}

TEST(HostileMetricsMapping, ShardsOffsetNearTwoToTheSixtyFourIsRefused) {
  TemporaryDirectory directory;
  CraftedMetrics metrics(getpid());
  // Two shards of 2 GiB: shards_offset + 2^32 wraps around to the sound shards' offset.
  metrics.header().shard_size = 1u << 31;
  metrics.header().shards_offset = CraftedMetrics::kShardsOffset - (uint64_t{1} << 32);
  expect_refused_as_bad_input(show_metrics(directory, metrics), "shards_offset",
                              offsetof(format::MetricsHeader, shards_offset));
}

TEST(HostileMetricsMapping, DirectoryOffsetNearTwoToTheSixtyFourIsRefused) {
  TemporaryDirectory directory;
  CraftedMetrics metrics(getpid());
  // 2^32 - 1 entries of 640 bytes: directory_offset + their size wraps around to the sound offset.
  metrics.header().max_metrics = 0xFFFFFFFF;
  metrics.header().directory_offset = CraftedMetrics::kDirectory - uint64_t{0xFFFFFFFF} * sizeof(format::MetricEntry);
  expect_refused_as_bad_input(show_metrics(directory, metrics), "directory_offset",
                              offsetof(format::MetricsHeader, directory_offset));
}

// ---- files planted by another user -----------------------------------------------------------

// A user made for the test (we are root) and removed after; its files are the neighbour's.
class OtherUser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the test creates a second user with useradd";
    name_ = fmt::format("chrtest{}", getpid());
    const auto made = run("useradd --system --no-create-home --shell /usr/sbin/nologin " + name_);
    ASSERT_EQ(made.exit_code, 0) << made.err;
    const passwd* entry = getpwnam(name_.c_str());
    ASSERT_NE(entry, nullptr);
    uid_ = entry->pw_uid;
    gid_ = entry->pw_gid;
  }
  void TearDown() override {
    if (!name_.empty()) run("userdel " + name_);
  }
  // Writes `bytes` at `path` as the other user's file, newer than anything of ours.
  void plant(const std::string& path, const std::vector<uint8_t>& bytes) {
    write_bytes(path, bytes);
    ASSERT_EQ(chown(path.c_str(), uid_, gid_), 0);
    const timespec later[2] = {{time(nullptr) + 3600, 0}, {time(nullptr) + 3600, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), later, 0), 0);
  }
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

std::string session_file_of(const std::string& directory, int pid) {
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    if (entry.path().filename().string().starts_with(fmt::format("chronicle-{}-", pid))) return entry.path().string();
  return {};
}

TEST_F(OtherUser, SnapshotOfAProcessReadsOnlyMappingsOfItsUser) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.mode = Mode::flight;
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 100; ++i) CHRONICLE_COUNTER("own", "sequence", i);
  const std::string own = session_file_of(directory.path(), getpid());
  const std::string planted = directory / fmt::format("chronicle-{}-99.shm", getpid());
  plant(planted, CraftedSession(getpid(), "planted").bytes);
  const std::string command =
      "CHRONICLE_SHM_DIR=" + directory.path() + " " + kBounded + " snapshot " + std::to_string(getpid()) + " -o ";
  const auto result = run(command + (directory / "snapshot"));
  stop();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("snapshot of " + own), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(planted), std::string::npos) << "the refusal names the file: " << result.err;
  EXPECT_NE(result.err.find("owned by"), std::string::npos) << result.err;

  // With only the planted file left, there is nothing to read, and the reason is given.
  const auto alone = run(command + (directory / "snapshot-2"));
  EXPECT_EQ(alone.exit_code, 1) << alone.err;
  EXPECT_NE(alone.err.find("owned by"), std::string::npos) << alone.err;
  EXPECT_FALSE(std::filesystem::exists(directory / "snapshot-2"));
}

TEST_F(OtherUser, MetricsOfAProcessAreReadOnlyFromAMappingOfItsUser) {
  TemporaryDirectory directory;
  const std::string planted = directory / fmt::format("chronicle-metrics-{}.shm", getpid());
  plant(planted, CraftedMetrics(getpid()).bytes);
  const auto result =
      run("CHRONICLE_METRICS_DIR=" + directory.path() + " " + kBounded + " metrics show " + std::to_string(getpid()));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.out.find("requests_total"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("owned by"), std::string::npos) << result.err;
}

// ---- a session name taken in advance ----------------------------------------------------------

// Standard error of this process, captured while it lives.
class CapturedStderr {
 public:
  explicit CapturedStderr(const std::string& path) : saved_(dup(STDERR_FILENO)) {
    std::fflush(stderr);
    const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(file, STDERR_FILENO);
    close(file);
  }
  ~CapturedStderr() {
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }

 private:
  int saved_;
};

TEST(SessionName, TakenInAdvanceTracingGoesOnUnderAnotherName) {
  TemporaryDirectory directory;
  // Every name the session could count its way to: the next one is taken whatever it is.
  const timespec long_ago[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  for (int serial = 0; serial < 256; ++serial) {
    const std::string taken = directory / fmt::format("chronicle-{}-{}.shm", getpid(), serial);
    write_bytes(taken, {});
    ASSERT_EQ(utimensat(AT_FDCWD, taken.c_str(), long_ago, 0), 0);
  }
  Config config = test::test_config(directory);
  config.mode = Mode::flight;
  bool started = false;
  {
    CapturedStderr capture(directory / "stderr");
    started = start(config);
  }
  ASSERT_TRUE(started) << last_error();
  for (int i = 0; i < 100; ++i) CHRONICLE_COUNTER("renamed", "sequence", i);
  std::ifstream said(directory / "stderr");
  const std::string message((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("already exists"), std::string::npos) << message;
  const auto result = run("CHRONICLE_SHM_DIR=" + directory.path() + " " + kBounded + " snapshot " +
                          std::to_string(getpid()) + " -o " + (directory / "snapshot"));
  stop();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  reader::Trace trace(directory / "snapshot");
  EXPECT_EQ(test::read_all(trace).size(), 100u);
}

}  // namespace
}  // namespace chronicle
