// Timestamp deltas of a trace's thread streams: the most frequent values and the empirical
// entropy (bits/event), overall and split by event id: the floor a per-event entropy coder of
// the deltas reaches (no context beyond the id).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>
#include <vector>

#include "format/packet_decoder.hpp"
using namespace chronicle;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: delta_hist TRACE_DIR\n");
    return 2;
  }
  std::unordered_map<uint64_t, uint64_t> all;
  std::map<uint32_t, std::unordered_map<uint64_t, uint64_t>> by_id;
  uint64_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    if (entry.path().filename().string().rfind("thread-", 0) != 0) continue;
    const size_t size = std::filesystem::file_size(entry.path());
    std::vector<uint64_t> storage((size + 7) / 8);
    std::ifstream(entry.path(), std::ios::binary).read(reinterpret_cast<char*>(storage.data()), size);
    const auto* data = reinterpret_cast<const uint8_t*>(storage.data());
    for (size_t off = 0; off < size;) {
      const auto psize = format::framed_packet_size(data + off, size - off);
      if (!psize) break;
      const auto& h = *reinterpret_cast<const format::PacketHeader*>(data + off);
      format::PacketDecoder dec(data + off, format::content_bytes(h));
      format::RawEvent ev;
      uint64_t prev = h.timestamp_begin;
      while (dec.next(ev)) {
        const uint64_t d = ev.ticks - prev;
        prev = ev.ticks;
        ++all[d];
        ++by_id[ev.spec->id][d];
        ++n;
      }
      off += *psize;
    }
  }
  auto entropy = [](const std::unordered_map<uint64_t, uint64_t>& h, uint64_t& total) {
    total = 0;
    for (auto& [k, c] : h) total += c;
    double e = 0;
    for (auto& [k, c] : h) e -= double(c) * std::log2(double(c) / double(total));
    return e;  // bits in total
  };
  uint64_t t;
  const double e_all = entropy(all, t);
  double e_split = 0;
  for (auto& [id, h] : by_id) e_split += entropy(h, t);
  std::printf(
      "%s: %llu events, %zu distinct deltas; entropy %.2f bits/event (%.3f B), split by id %.2f bits/event (%.3f B)\n",
      argv[1], (unsigned long long)n, all.size(), e_all / n, e_all / n / 8, e_split / n, e_split / n / 8);
  std::vector<std::pair<uint64_t, uint64_t>> top(all.begin(), all.end());
  std::sort(top.begin(), top.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::printf("most frequent deltas (ticks: share):");
  for (size_t i = 0; i < std::min<size_t>(top.size(), 16); ++i)
    std::printf(" %llu:%.1f%%", (unsigned long long)top[i].first, 100.0 * top[i].second / n);
  std::printf("\n");
}
