// Copies a trace directory, moving every compact-header event's time forward by a random
// 0..Q-1 ticks (never past the next event or the packet's end): the times a clock of 1-tick
// resolution could have read where this VM's TSC advances in steps of Q (21) ticks. A sensitivity
// check for the compression figures, which depend on the entropy of the time deltas.
//   dequantize SRC DST [Q]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "format/packet_decoder.hpp"
using namespace chronicle;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const fs::path src = argv[1], dst = argv[2];
  const uint64_t q = argc > 3 ? std::stoull(argv[3]) : 21;
  fs::create_directories(dst);
  std::mt19937_64 rng(42);
  for (const auto& entry : fs::directory_iterator(src)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("thread-", 0) != 0) {
      if (entry.is_regular_file()) fs::copy_file(entry.path(), dst / name, fs::copy_options::overwrite_existing);
      continue;
    }
    const size_t size = fs::file_size(entry.path());
    std::vector<uint64_t> storage((size + 7) / 8);
    std::ifstream(entry.path(), std::ios::binary).read(reinterpret_cast<char*>(storage.data()), size);
    auto* data = reinterpret_cast<uint8_t*>(storage.data());
    for (size_t off = 0; off < size;) {
      const auto psize = format::framed_packet_size(data + off, size - off);
      if (!psize) break;
      const auto& h = *reinterpret_cast<const format::PacketHeader*>(data + off);
      struct E {
        size_t offset;
        uint64_t t;
        uint32_t id;
        bool compact;
      };
      std::vector<E> events;
      format::PacketDecoder dec(data + off, format::content_bytes(h));
      format::RawEvent ev;
      while (dec.next(ev)) events.push_back({ev.offset, ev.ticks, ev.spec->id, data[off + ev.offset] != 31});
      const uint64_t end = h.timestamp_end.load();
      const uint64_t half = format::kCompactTimestampMask / 2;
      for (size_t i = 0; i < events.size(); ++i) {
        auto& e = events[i];
        if (!e.compact) continue;
        const uint64_t next = i + 1 < events.size() ? events[i + 1].t : end;
        const uint64_t prev = i > 0 ? events[i - 1].t : h.timestamp_begin;
        if (next - e.t > half || e.t - prev > half) continue;
        const uint64_t room = std::min<uint64_t>(q - 1, next - e.t);
        const uint64_t t = e.t + std::uniform_int_distribution<uint64_t>(0, room)(rng);
        const uint32_t word = e.id | static_cast<uint32_t>(t & format::kCompactTimestampMask) << format::kCompactIdBits;
        std::memcpy(data + off + e.offset, &word, 4);
      }
      uint32_t types = 0;
      if (!format::events_decode(data + off, format::content_bytes(h), types)) {
        std::fprintf(stderr, "%s: packet at %zu no longer decodes\n", name.c_str(), off);
        return 1;
      }
      off += *psize;
    }
    std::ofstream(dst / name, std::ios::binary).write(reinterpret_cast<const char*>(data), size);
  }
  return 0;
}
