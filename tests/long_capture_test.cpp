// Hours-long captures (issue 17): compressed trace files (.ctfz), rotation into chunks,
// --max-size, and `chronicle convert` back to plain CTF for babeltrace2.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <algorithm>
#include <chronicle/chronicle.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "compression/ctfz.hpp"
#include "format/metadata.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

namespace fs = std::filesystem;
using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kCountedSpans = COUNTED_SPANS;

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Where each packet of a plain stream file starts.
std::vector<size_t> packet_starts(const std::vector<uint8_t>& file) {
  std::vector<size_t> starts;
  for (size_t offset = 0; offset < file.size();) {
    starts.push_back(offset);
    offset += reinterpret_cast<const format::PacketHeader*>(file.data() + offset)->packet_size_bits / 8;
  }
  return starts;
}

// The file cut into `units` units at packet boundaries, compressed, and decoded again.
std::vector<uint8_t> round_trip(const std::vector<uint8_t>& file, size_t units,
                                std::vector<compression::UnitProblem>& problems,
                                std::vector<uint8_t>* compressed = nullptr) {
  const std::vector<size_t> starts = packet_starts(file);
  std::vector<uint8_t> encoded;
  const size_t per_unit = std::max<size_t>(1, (starts.size() + units - 1) / units);
  for (size_t first = 0; first < starts.size(); first += per_unit) {
    const size_t begin = starts[first];
    const size_t end = first + per_unit < starts.size() ? starts[first + per_unit] : file.size();
    compression::append_unit({file.data() + begin, end - begin}, compression::UnitContent::packets, 0, encoded);
  }
  if (compressed) *compressed = encoded;
  std::vector<uint8_t> decoded;
  compression::decode_file(
      encoded, [&](std::span<const uint8_t> unit) { decoded.insert(decoded.end(), unit.begin(), unit.end()); },
      problems);
  return decoded;
}

// A plain trace from this process: spans, counters, notes (strings) and instants on three threads.
void write_plain_trace(const TemporaryDirectory& directory) {
  Config config = test::test_config(directory);
  config.packet_size = 4096;  // many packets
  ASSERT_TRUE(start(config)) << last_error();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([t] {
      for (int64_t i = 0; i < 5000; ++i) {
        CHRONICLE_SPAN("test", "outer");
        CHRONICLE_COUNTER("test", "sequence", i * (t + 1) - 7);
        if (i % 50 == 0) CHRONICLE_NOTE("test", "thread {} round {}", t, i);
        if (i % 7 == 0) CHRONICLE_INSTANT("test", "seventh");
      }
    });
  for (auto& thread : threads) thread.join();
  stop();
}

std::vector<std::string> thread_files(const std::string& directory) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(directory))
    if (entry.path().filename().string().starts_with("thread-")) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// A stream file of a plain trace written in `directory`, and the same in three units.
void in_three_units(const TemporaryDirectory& directory, std::vector<uint8_t>& file, std::vector<uint8_t>& compressed) {
  write_plain_trace(directory);
  file = slurp(thread_files(directory / "trace").at(1));
  std::vector<compression::UnitProblem> problems;
  round_trip(file, 3, problems, &compressed);
  ASSERT_TRUE(problems.empty());
}

TEST(Compression, UnitsGiveBackEveryPacketByteForByte) {
  TemporaryDirectory directory;
  write_plain_trace(directory);
  const std::vector<std::string> files = thread_files(directory / "trace");
  ASSERT_GE(files.size(), 3u);
  size_t packets = 0;
  for (const std::string& path : files) {
    const std::vector<uint8_t> file = slurp(path);
    packets += packet_starts(file).size();
    for (size_t units : {size_t{1}, size_t{3}, size_t{1000}}) {
      std::vector<compression::UnitProblem> problems;
      std::vector<uint8_t> compressed;
      EXPECT_EQ(round_trip(file, units, problems, &compressed), file) << path << " in " << units << " units";
      EXPECT_TRUE(problems.empty()) << problems.front().reason;
      if (units == 1) {
        EXPECT_LT(compressed.size() * 4, file.size()) << "the transform and zstd should compress";
      }
    }
  }
  EXPECT_GT(packets, 6u);
  // The definitions (another stream, with strings) too.
  const std::vector<uint8_t> strings = slurp(directory / "trace/strings");
  std::vector<compression::UnitProblem> problems;
  EXPECT_EQ(round_trip(strings, 1, problems), strings);
}

// What warm_up writes is thrown away: a warmed writer's units are a cold one's, byte for byte,
// and it hands out the buffers it was asked for, empty, each large enough for a unit.
TEST(Compression, AWarmedWriterWritesWhatAColdOneWrites) {
  TemporaryDirectory directory;
  write_plain_trace(directory);
  const std::vector<uint8_t> file = slurp(thread_files(directory / "trace").at(0));
  const uint32_t events = 1234;
  compression::UnitWriter cold;
  std::vector<uint8_t> cold_unit;
  cold.append(file, compression::UnitContent::packets, events, cold_unit);

  compression::UnitWriter warm;
  constexpr size_t kUnitBytes = 256 << 10;
  warm.warm_up(kUnitBytes, 2);
  std::vector<uint8_t> warm_unit;
  warm.append(file, compression::UnitContent::packets, events, warm_unit);
  EXPECT_EQ(warm_unit, cold_unit);
  for (int i = 0; i < 2; ++i) {
    const std::vector<uint8_t> buffer = warm.take_buffer();
    EXPECT_TRUE(buffer.empty());
    EXPECT_GE(buffer.capacity(), kUnitBytes);
  }
  EXPECT_EQ(warm.take_buffer().capacity(), 0u) << "two buffers were asked for";
}

TEST(Compression, APacketTheDecoderRefusesComesBackVerbatim) {
  TemporaryDirectory directory;
  write_plain_trace(directory);
  std::vector<uint8_t> file = slurp(thread_files(directory / "trace").at(1));
  const std::vector<size_t> starts = packet_starts(file);
  ASSERT_GE(starts.size(), 3u);
  // The second packet's first event gets an id no event has (30), its third a stray byte.
  file[starts[1] + format::kPacketHeaderSize] =
      static_cast<uint8_t>((file[starts[1] + format::kPacketHeaderSize] & ~31) | 30);
  file[starts[2] + format::kPacketHeaderSize + 9] ^= 0x5a;
  std::vector<compression::UnitProblem> problems;
  EXPECT_EQ(round_trip(file, 1, problems), file);
  EXPECT_TRUE(problems.empty());
}

TEST(Compression, ADamagedUnitIsSkippedAndTheOthersRead) {
  TemporaryDirectory directory;
  std::vector<uint8_t> file, compressed;
  std::vector<compression::UnitProblem> problems;
  in_three_units(directory, file, compressed);
  // Find the second unit: after the first entry (8 + 48 bytes) and its frame.
  uint64_t first_frame = 0;
  std::memcpy(&first_frame, compressed.data() + 8 + 16, 8);
  const size_t second = 8 + 48 + first_frame;
  compressed[second + 8 + 48 + 20] ^= 0xff;  // inside its zstd frame
  std::vector<uint8_t> decoded;
  std::vector<compression::UnitProblem> found;
  compression::decode_file(
      compressed, [&](std::span<const uint8_t> unit) { decoded.insert(decoded.end(), unit.begin(), unit.end()); },
      found);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].offset, second);
  // The first and third units are whole: the decoded bytes are the file without the second.
  const std::vector<size_t> starts = packet_starts(file);
  const size_t per_unit = (starts.size() + 2) / 3;
  std::vector<uint8_t> expected(file.begin(), file.begin() + static_cast<ptrdiff_t>(starts[per_unit]));
  expected.insert(expected.end(), file.begin() + static_cast<ptrdiff_t>(starts[2 * per_unit]), file.end());
  EXPECT_EQ(decoded, expected);
}

// A compressed metadata (60 KB) of units that each claim the most a unit may hold (256 MiB) would
// decode to a gigabyte: the cap is what the whole file may decode to, not each unit.
TEST(Compression, AMetadataOfManyLargeUnitsIsRefusedAtTheFilesCap) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_EQ(run(kCli + " record -q -o " + trace + " -- " + kCountedSpans + " 1 10").exit_code, 0);
  std::vector<uint8_t> unit;
  compression::append_unit(std::vector<uint8_t>(compression::kMaxUnitRawSize, ' '), compression::UnitContent::bytes, 0,
                           unit, 1);
  std::vector<uint8_t> compressed;
  for (int copy = 0; copy < 4; ++copy) compressed.insert(compressed.end(), unit.begin(), unit.end());
  fs::remove(trace + "/metadata");
  std::ofstream(trace + "/metadata.ctfz", std::ios::binary)
      .write(reinterpret_cast<const char*>(compressed.data()), static_cast<std::streamsize>(compressed.size()));
  // The address-space limit keeps the unfixed reader from taking the machine's memory.
  const auto result = run(test::address_space_cap(2000000) + "timeout 60 " + kCli + " stats " + trace);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find(trace + "/metadata.ctfz: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("more than the 16 MiB a metadata may hold"), std::string::npos) << result.err;
}

// Per thread, the values of counter "sequence" in the order read.
std::map<uint32_t, std::vector<int64_t>> sequences(const reader::Trace& trace, size_t* spans = nullptr) {
  std::map<uint32_t, std::vector<int64_t>> values;
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (event.type == format::EventId::counter && site && site->name == "sequence")
      values[event.thread_id].push_back(event.value);
    if (spans && event.type == format::EventId::span_end && event.span) ++*spans;
    return true;
  });
  return values;
}

std::vector<std::string> files_named(const std::string& directory, const std::string& name) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(directory))
    if (entry.path().filename() == name) found.push_back(entry.path().string());
  return found;
}

TEST(Compression, AnInProcessSessionWritesACompressedTraceTheToolsRead) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.compress = true;
  ASSERT_TRUE(start(config)) << last_error();
  std::thread other([] {
    for (int64_t i = 0; i < 20000; ++i) CHRONICLE_COUNTER("test", "sequence", i);
  });
  for (int64_t i = 0; i < 20000; ++i) CHRONICLE_COUNTER("test", "sequence", i);
  other.join();
  stop();
  EXPECT_TRUE(files_named(directory / "trace", "metadata").empty()) << "babeltrace2 would take it for a CTF trace";
  EXPECT_FALSE(files_named(directory / "trace", "metadata.ctfz").empty());
  const reader::Trace trace(directory / "trace");
  EXPECT_TRUE(trace.warnings().empty()) << trace.warnings().front();
  const auto values = sequences(trace);
  ASSERT_EQ(values.size(), 2u);
  std::vector<int64_t> expected(20000);
  for (int64_t i = 0; i < 20000; ++i) expected[static_cast<size_t>(i)] = i;
  for (const auto& [thread, sequence] : values) EXPECT_EQ(sequence, expected) << "thread " << thread;
}

// A compressed trace is read a unit at a time, in memory: nothing is decoded to a file.
TEST(Compression, ReadingACompressedTraceWritesNoFile) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.compress = true;
  ASSERT_TRUE(start(config)) << last_error();
  constexpr int64_t kCounters = 200000;  // ~2.6 MB of plain events
  for (int64_t i = 0; i < kCounters; ++i) CHRONICLE_COUNTER("test", "sequence", i);
  stop();
  struct FileSizeLimit {  // no file written past 64 KiB while it holds
    rlimit saved{};
    void (*saved_handler)(int) = nullptr;
    FileSizeLimit() {
      getrlimit(RLIMIT_FSIZE, &saved);
      saved_handler = signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{64 << 10, saved.rlim_max};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    ~FileSizeLimit() {
      setrlimit(RLIMIT_FSIZE, &saved);
      signal(SIGXFSZ, saved_handler);
    }
  };
  std::map<uint32_t, std::vector<int64_t>> values;
  {
    FileSizeLimit limit;
    try {
      const reader::Trace trace(directory / "trace");
      values = sequences(trace);
    } catch (const std::exception& failure) {
      ADD_FAILURE() << failure.what();
    }
  }
  ASSERT_EQ(values.size(), 1u);
  const std::vector<int64_t>& sequence = values.begin()->second;
  ASSERT_EQ(sequence.size(), static_cast<size_t>(kCounters));
  for (int64_t i = 0; i < kCounters; ++i) ASSERT_EQ(sequence[static_cast<size_t>(i)], i);
}

// The seek table comes from the units' entries: a unit whose frame is damaged is still listed
// (it fails when decoded, alone), and a file cut short lists the whole units before the cut.
TEST(Compression, TheSeekTableFindsEveryUnitWithoutDecodingIt) {
  TemporaryDirectory directory;
  std::vector<uint8_t> file, compressed;
  std::vector<compression::UnitProblem> problems;
  in_three_units(directory, file, compressed);
  const std::vector<size_t> starts = packet_starts(file);
  const size_t per_unit = (starts.size() + 2) / 3;
  const std::vector<uint64_t> raw_offsets{0, starts[per_unit], starts[2 * per_unit]};

  std::vector<compression::UnitPlace> units = compression::list_units(compressed, problems);
  ASSERT_EQ(units.size(), 3u);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(units[0].offset, 0u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(units[k].raw_offset, raw_offsets[k]) << "unit " << k;
    if (k > 0) {
      EXPECT_EQ(units[k].offset, units[k - 1].offset + units[k - 1].bytes);
    }
  }
  EXPECT_EQ(units[2].offset + units[2].bytes, compressed.size());

  compressed[units[1].offset + 8 + 48 + 20] ^= 0xff;  // inside the second unit's zstd frame
  units = compression::list_units(compressed, problems);
  ASSERT_EQ(units.size(), 3u);
  EXPECT_TRUE(problems.empty());
  compression::UnitDecoder decoder;
  EXPECT_THROW(decoder.decode(compressed, units[1]), compression::UnitError);
  for (size_t k : {size_t{2}, size_t{0}}) {  // out of order: a unit decodes alone
    const std::span<const uint8_t> raw = decoder.decode(compressed, units[k]);
    const uint64_t end = k == 2 ? file.size() : raw_offsets[1];
    EXPECT_TRUE(std::equal(raw.begin(), raw.end(), file.begin() + static_cast<ptrdiff_t>(raw_offsets[k]),
                           file.begin() + static_cast<ptrdiff_t>(end)))
        << "unit " << k;
  }

  compressed.resize(units[2].offset + units[2].bytes / 2);
  units = compression::list_units(compressed, problems);
  EXPECT_EQ(units.size(), 2u);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].offset, units[1].offset + units[1].bytes);
}

// A compressed stream file with a damaged unit: the reader names the unit and reads the others.
TEST(Compression, ATraceWithADamagedUnitReadsTheOtherUnits) {
  TemporaryDirectory directory;
  write_plain_trace(directory);
  const std::string trace_dir = directory / "trace";
  const reader::Trace plain(trace_dir);
  const auto expected = sequences(plain);
  const std::vector<std::string> files = thread_files(trace_dir);
  ASSERT_EQ(files.size(), 3u);
  std::vector<compression::UnitPlace> damaged_units;
  for (size_t f = 0; f < files.size(); ++f) {
    std::vector<compression::UnitProblem> problems;
    std::vector<uint8_t> compressed;
    round_trip(slurp(files[f]), 3, problems, &compressed);
    if (f == 1) {
      damaged_units = compression::list_units(compressed, problems);
      ASSERT_EQ(damaged_units.size(), 3u);
      compressed[damaged_units[1].offset + 8 + 48 + 20] ^= 0xff;
    }
    fs::remove(files[f]);
    std::ofstream(files[f] + ".ctfz", std::ios::binary)
        .write(reinterpret_cast<const char*>(compressed.data()), static_cast<std::streamsize>(compressed.size()));
  }
  const reader::Trace trace(trace_dir);
  ASSERT_EQ(trace.damage().size(), 1u);
  const reader::Damage& damage = trace.damage().front();
  EXPECT_EQ(damage.file, files[1] + ".ctfz");
  EXPECT_EQ(damage.offset, damaged_units[1].offset);
  EXPECT_EQ(damage.bytes, damaged_units[1].bytes);
  EXPECT_NE(damage.reason.find("compressed unit"), std::string::npos) << damage.reason;
  const auto values = sequences(trace);
  ASSERT_EQ(values.size(), 3u);
  size_t whole = 0;
  for (const auto& [thread, sequence] : values) {
    const std::vector<int64_t>& all = expected.at(thread);
    if (sequence == all) {
      ++whole;
      continue;
    }
    // The damaged file's: its first and third units' values, in order (a thread's values rise).
    EXPECT_LT(sequence.size(), all.size());
    EXPECT_GT(sequence.size(), all.size() / 2);
    EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
    EXPECT_TRUE(std::includes(all.begin(), all.end(), sequence.begin(), sequence.end()));
  }
  EXPECT_EQ(whole, 2u);
  EXPECT_EQ(sequences(trace), values) << "read again";
}

// The kernel's figure for this process, in KiB ("VmHWM", "VmRSS").
uint64_t status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with(field + ":")) return std::stoull(line.substr(field.size() + 1));
  return 0;
}

// A reader lets go of the pages of a large trace's stream files behind it: reading the trace
// whole, at open and then through cursors, raises the peak resident size by far less than its
// size. (This trace counts as large: above 32 MiB rather than reader::kBytesKeptMapped.)
TEST(LongCapture, ReadingATraceKeepsLittleOfItResident) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.buffer_size = 64 << 20;
  ASSERT_TRUE(start(config)) << last_error();
  const std::string stream_dir = directory / "trace";
  for (int64_t round = 0; round < 24; ++round) {  // ~6 M counters, ~108 MB: what drops is counted
    for (int64_t i = 0; i < 250000; ++i) CHRONICLE_COUNTER("test", "sequence", i);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the collector's turn
  }
  stop();
  uint64_t written = 0;
  for (const std::string& file : thread_files(stream_dir)) written += fs::file_size(file);
  ASSERT_GE(written, 64u << 20) << "the trace this test reads";

  std::ofstream("/proc/self/clear_refs") << "5";  // the peak starts again from here
  const uint64_t before = status_kib("VmRSS");
  ASSERT_GT(before, 0u);
  ASSERT_LE(status_kib("VmHWM"), before + 1024) << "this kernel does not reset the peak";
  uint64_t events = 0;
  {
    const reader::Trace trace(stream_dir, reader::OpenOptions{.bytes_kept_mapped = 32 << 20});
    for (size_t stream = 0; stream < trace.streams().size(); ++stream)
      trace.for_each_in_stream(stream, [&](const reader::Event&) { return ++events > 0; });
    trace.for_each_event([&](const reader::Event&) { return ++events > 0; });
  }
  const uint64_t growth = status_kib("VmHWM") - before;
  EXPECT_GT(events, written / 20 * 2);  // every event twice: at least 1 per 20 bytes
  EXPECT_LT(growth, 32u << 10) << "KiB, reading " << (written >> 20) << " MiB";
}

// The rotated trace's chunk directories, by number.
std::vector<uint64_t> chunk_numbers(const std::string& directory) {
  std::vector<uint64_t> numbers;
  for (const auto& entry : fs::directory_iterator(directory))
    if (const uint64_t number = reader::chunk_number(entry.path().filename().string())) numbers.push_back(number);
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

std::string collector_chunk(uint64_t number) {
  return fmt::format("chunk-{:06}", number);
}

constexpr int kThreads = 2;

TEST(LongCapture, ARotatedCompressedTraceReadsBackEveryEventWritten) {
  TemporaryDirectory directory;
  const std::string trace_dir = directory / "trace";
  constexpr long kRounds = 150000;
  const auto recorded = run(fmt::format("{} record -q --compress --rotate 1K --buffer-size 16M -o {} -- {} {} {}", kCli,
                                        trace_dir, kCountedSpans, kThreads, kRounds));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_NE(recorded.err.find("chunks"), std::string::npos) << recorded.err;
  const std::vector<uint64_t> chunks = chunk_numbers(trace_dir);
  ASSERT_GE(chunks.size(), 3u)
      << "3 MiB per thread in 1 MiB units, and a chunk ends with any unit written: the run needs several";
  EXPECT_EQ(chunks.front(), 1u);
  EXPECT_EQ(chunks.back(), chunks.size());
  EXPECT_TRUE(files_named(trace_dir, "metadata").empty());
  for (uint64_t number : chunks)
    EXPECT_EQ(reader::find_traces(trace_dir + "/" + collector_chunk(number)).size(), 1u) << "each chunk is a trace";

  const reader::Trace trace(trace_dir);
  EXPECT_TRUE(trace.warnings().empty()) << trace.warnings().front();
  EXPECT_EQ(trace.events_discarded(), 0u);
  size_t spans = 0;
  const auto values = sequences(trace, &spans);
  ASSERT_EQ(values.size(), static_cast<size_t>(kThreads));
  for (const auto& [thread, sequence] : values) {
    ASSERT_EQ(sequence.size(), static_cast<size_t>(kRounds)) << "thread " << thread;
    for (long i = 0; i < kRounds; ++i) ASSERT_EQ(sequence[static_cast<size_t>(i)], i) << "thread " << thread;
  }
  EXPECT_EQ(spans, static_cast<size_t>(kThreads * kRounds)) << "every span pairs, across chunks";
  EXPECT_EQ(reader::find_traces(trace_dir), std::vector<std::string>{trace_dir}) << "one trace, not one per chunk";

  // The tools take it as one trace.
  const auto dumped = run(fmt::format("{} dump {}", kCli, trace_dir));
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  EXPECT_EQ(test::count_lines(dumped.out), test::read_all(trace).size());
  const auto stats = run(fmt::format("{} stats --json {}", kCli, trace_dir));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;

  // convert: plain CTF that babeltrace2 reads with no warning and the same events.
  const std::string plain = directory / "plain";
  const auto converted = run(fmt::format("{} convert {} {}", kCli, trace_dir, plain));
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  const reader::Trace plain_trace(plain);
  EXPECT_EQ(sequences(plain_trace), values);
  // babeltrace2's text output (its Python bindings take minutes over a million events): one line
  // per event, and a warning on standard error for anything discarded or damaged.
  const auto theirs = run("babeltrace2 " + plain + " | grep -cv '_definition: '");
  ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_EQ(theirs.err, "");
  EXPECT_EQ(std::stoull(theirs.out), test::read_all(trace).size());
}

TEST(LongCapture, MaxSizeKeepsTheNewestChunksAndTheTraceStillReads) {
  TemporaryDirectory directory;
  const std::string trace_dir = directory / "trace";
  constexpr long kRounds = 60000;
  const auto recorded =
      run(fmt::format("{} record -q --rotate 128K --max-size 512K --buffer-size 16M -o {} -- {} {} {}", kCli, trace_dir,
                      kCountedSpans, kThreads, kRounds));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_NE(recorded.err.find("removed to stay under --max-size 512K"), std::string::npos) << recorded.err;
  const std::vector<uint64_t> chunks = chunk_numbers(trace_dir);
  ASSERT_FALSE(chunks.empty());
  EXPECT_GT(chunks.front(), 1u) << "the oldest chunks go";
  // Every chunk but the newest was under the bound when it was removed or kept.
  uint64_t kept = 0, newest = 0;
  for (uint64_t number : chunks) {
    uint64_t bytes = 0;
    for (const auto& entry : fs::directory_iterator(trace_dir + "/" + collector_chunk(number)))
      bytes += entry.file_size();
    kept += bytes;
    newest = bytes;
  }
  EXPECT_LE(kept - newest, 512u << 10);

  const reader::Trace trace(trace_dir);
  EXPECT_EQ(trace.first_chunk_number(), chunks.front());
  const std::vector<std::string> warnings = trace.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("were removed (record --max-size)"), std::string::npos) << warnings[0];
  // Each thread's counter runs without a hole from where the kept chunks begin to its last value.
  const auto values = sequences(trace);
  ASSERT_FALSE(values.empty());
  for (const auto& [thread, sequence] : values) {
    ASSERT_FALSE(sequence.empty());
    EXPECT_EQ(sequence.back(), kRounds - 1) << "thread " << thread;
    EXPECT_GT(sequence.front(), 0) << "thread " << thread << ": its oldest events were removed";
    for (size_t i = 1; i < sequence.size(); ++i) ASSERT_EQ(sequence[i], sequence[i - 1] + 1) << "thread " << thread;
  }
  const auto stats = run(fmt::format("{} stats {}", kCli, trace_dir));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE((stats.out + stats.err).find("were removed"), std::string::npos) << stats.out << stats.err;
}

TEST(LongCapture, RecordSaysWhatItCannotDoWithTheseOptions) {
  TemporaryDirectory directory;
  const auto no_rotate =
      run(fmt::format("{} record -q --max-size 1G -o {} -- {} 1 10", kCli, directory / "a", kCountedSpans));
  EXPECT_EQ(no_rotate.exit_code, 1);
  EXPECT_NE(no_rotate.err.find("add --rotate"), std::string::npos) << no_rotate.err;
  const auto bad =
      run(fmt::format("{} record -q --rotate 10parsecs -o {} -- {} 1 10", kCli, directory / "b", kCountedSpans));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("expected a size (64M) or a duration"), std::string::npos) << bad.err;
  const auto flight =
      run(fmt::format("{} record -q --mode flight --rotate 1M -o {} -- {} 1 10", kCli, directory / "c", kCountedSpans));
  EXPECT_EQ(flight.exit_code, 1);
  EXPECT_NE(flight.err.find("flight recorder"), std::string::npos) << flight.err;
  EXPECT_FALSE(fs::exists(directory / "a"));
}

TEST(LongCapture, ConvertRefusesADirectoryThatHoldsSomething) {
  TemporaryDirectory directory;
  const auto recorded =
      run(fmt::format("{} record -q --compress -o {} -- {} 1 100", kCli, directory / "trace", kCountedSpans));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  fs::create_directories(directory / "out");
  std::ofstream(directory / "out/keep") << "mine\n";
  const auto converted = run(fmt::format("{} convert {} {}", kCli, directory / "trace", directory / "out"));
  EXPECT_EQ(converted.exit_code, 1);
  EXPECT_NE(converted.err.find("not empty"), std::string::npos) << converted.err;
  EXPECT_TRUE(fs::exists(directory / "out/keep"));
}

}  // namespace
}  // namespace chronicle
