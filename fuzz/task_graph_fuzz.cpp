// The input is a sequence of task events (any order, any ids): the graph builder and the
// critical path must end on everything, cycles included.
#include <cstring>

#include "analysis/critical_path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronicle;
  model::TaskGraphBuilder builder([](uint32_t id) { return "site" + std::to_string(id); });
  constexpr size_t kRecord = 12;
  uint64_t ticks = 0;
  for (size_t at = 0; at + kRecord <= size && at < 64 * 1024; at += kRecord) {
    reader::Event event;
    const uint8_t type = data[at] % 16;
    event.type = static_cast<format::EventId>(type);
    ticks += data[at + 1];
    event.ticks = ticks;
    event.thread_id = data[at + 2] % 4;
    event.task = data[at + 3] % 32;
    event.related_task = data[at + 4] % 32;
    event.task_kind = static_cast<format::TaskKind>(data[at + 5] % 8);
    event.outcome = static_cast<format::TaskOutcome>(data[at + 6] % 4);
    std::memcpy(&event.name_id, data + at + 7, 4);
    builder.add(event);
  }
  const model::TaskGraph graph = builder.finish();
  for (const auto& task : graph.tasks()) (void)analysis::critical_path(graph, task.id);
  return 0;
}
