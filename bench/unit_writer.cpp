// The collector's compression alone: a plain trace's stream file cut into ~1 MiB units (as the
// collector cuts them) and given to compression::UnitWriter, ROUNDS times. Prints the events per
// second of one core, the nanoseconds per event and the bytes per event out; checks once that
// the units decode back to the same bytes.
//
//   CHRONICLE_OUTPUT=/tmp/s build/bench/span_storm 0.3 && build/bench/unit_writer /tmp/s/thread-* [ROUNDS]
#include "compression/ctfz.hpp"

#include <chronicle/detail/layout.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

struct Unit {
  std::span<const uint8_t> raw;
  uint32_t events = 0;
};

// Packets of `file` into units of about `unit_bytes`; events counted from the packet sizes is
// not possible, so the count is the bytes over 8 (spans average 8 bytes an event).
std::vector<Unit> cut_units(const std::vector<uint8_t>& file, size_t unit_bytes) {
  std::vector<Unit> units;
  size_t start = 0;
  size_t offset = 0;
  while (offset + chronicle::format::kPacketHeaderSize <= file.size()) {
    uint64_t size_bits = 0;
    std::memcpy(&size_bits, file.data() + offset + offsetof(chronicle::format::PacketHeader, packet_size_bits), 8);
    if (size_bits / 8 < chronicle::format::kPacketHeaderSize || offset + size_bits / 8 > file.size()) break;
    offset += size_bits / 8;
    if (offset - start >= unit_bytes) {
      units.push_back({{file.data() + start, offset - start}, static_cast<uint32_t>((offset - start) / 8)});
      start = offset;
    }
  }
  if (offset > start)
    units.push_back({{file.data() + start, offset - start}, static_cast<uint32_t>((offset - start) / 8)});
  return units;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: unit_writer STREAM_FILE [ROUNDS]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::vector<Unit> units = cut_units(file, 1 << 20);
  size_t raw_bytes = 0;
  for (const Unit& unit : units) raw_bytes += unit.raw.size();
  const double events = static_cast<double>(raw_bytes) / 8;

  chronicle::compression::UnitWriter writer;
  std::vector<uint8_t> out;
  std::vector<double> seconds;
  for (int round = 0; round < rounds; ++round) {
    out.clear();
    const auto start = std::chrono::steady_clock::now();
    for (const Unit& unit : units)
      writer.append(unit.raw, chronicle::compression::UnitContent::packets, unit.events, out);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<uint8_t> back;
  std::vector<chronicle::compression::UnitProblem> problems;
  chronicle::compression::decode_file(
      out, [&](std::span<const uint8_t> unit) { back.insert(back.end(), unit.begin(), unit.end()); }, problems);
  const bool same =
      problems.empty() && back.size() == raw_bytes && std::memcmp(back.data(), file.data(), raw_bytes) == 0;
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf("unit_writer: %zu units, %.1f M events (bytes/8), %d rounds: min %.3f s, median %.3f s, max %.3f s\n",
              units.size(), events / 1e6, rounds, seconds.front(), median, seconds.back());
  std::printf("unit_writer: median %.2f ns/event, %.1f M events/s on one core, %.3f bytes/event out, round trip %s\n",
              median / events * 1e9, events / median / 1e6, static_cast<double>(out.size()) / events,
              same ? "exact" : "DIFFERS");
  return same ? 0 : 1;
}
