#include "format/catalogue.hpp"

#include <array>
#include <cstring>

namespace chronicle::format {
namespace {

constexpr FieldSpec kNameOnly[] = {{"name_id", FieldType::u32}};
constexpr FieldSpec kNote[] = {{"name_id", FieldType::u32}, {"text", FieldType::string}};
constexpr FieldSpec kCounter[] = {{"name_id", FieldType::u32}, {"value", FieldType::s64}};
constexpr FieldSpec kCounterFloat[] = {{"name_id", FieldType::u32}, {"value", FieldType::f64}};
constexpr FieldSpec kSiteDefinition[] = {{"name_id", FieldType::u32},     {"kind", FieldType::u8},
                                         {"category", FieldType::string}, {"name", FieldType::string},
                                         {"file", FieldType::string},     {"line", FieldType::u32}};
// Names by value; the order follows TaskKind and TaskOutcome in layout.hpp.
constexpr std::string_view kTaskKindNames[] = {"unknown", "coroutine", "promise", "handler", "timer", "io"};
constexpr std::string_view kTaskOutcomeNames[] = {"ok", "failed", "cancelled"};
static_assert(std::size(kTaskKindNames) == kTaskKindCount);
static_assert(std::size(kTaskOutcomeNames) == kTaskOutcomeCount);

// Task ids are u64 (thread index << 40 | the thread's counter); 0 means "no task" (a parent or
// resolver outside any task, e.g. the event loop itself).
constexpr FieldSpec kTaskCreate[] = {{"task", FieldType::u64},
                                     {"parent", FieldType::u64},
                                     {"kind", FieldType::u8, kTaskKindNames},
                                     {"name_id", FieldType::u32}};
constexpr FieldSpec kTaskOnly[] = {{"task", FieldType::u64}};
constexpr FieldSpec kTaskWait[] = {{"task", FieldType::u64}, {"awaited", FieldType::u64}};
constexpr FieldSpec kTaskResolve[] = {{"task", FieldType::u64},
                                      {"resolver", FieldType::u64},
                                      {"outcome", FieldType::u8, kTaskOutcomeNames},
                                      {"text", FieldType::string}};
constexpr FieldSpec kTaskLabel[] = {{"task", FieldType::u64}, {"text", FieldType::string}};
constexpr FieldSpec kThreadDefinition[] = {{"thread_id", FieldType::u32}, {"name", FieldType::string}};

constexpr auto id(EventId e) {
  return static_cast<uint32_t>(e);
}
constexpr auto id(DefinitionId e) {
  return static_cast<uint32_t>(e);
}

constexpr int32_t fixed_size(std::span<const FieldSpec> fields) {
  int32_t size = 0;
  for (const auto& field : fields) {
    switch (field.type) {
      case FieldType::u8:
        size += 1;
        break;
      case FieldType::u32:
        size += 4;
        break;
      case FieldType::u64:
      case FieldType::s64:
      case FieldType::f64:
        size += 8;
        break;
      case FieldType::string:
        return -1;
    }
  }
  return size;
}

constexpr auto with_sizes(auto catalogue) {
  for (auto& spec : catalogue) spec.fixed_payload_size = fixed_size(spec.fields);
  return catalogue;
}

constexpr std::array kCatalogue = with_sizes(std::array{
    EventSpec{kStreamThread, id(EventId::span_begin), "span_begin", kNameOnly},
    EventSpec{kStreamThread, id(EventId::span_end), "span_end", {}},
    EventSpec{kStreamThread, id(EventId::instant), "instant", kNameOnly},
    EventSpec{kStreamThread, id(EventId::note), "note", kNote},
    EventSpec{kStreamThread, id(EventId::counter), "counter", kCounter},
    EventSpec{kStreamThread, id(EventId::counter_float), "counter_float", kCounterFloat},
    EventSpec{kStreamThread, id(EventId::task_create), "task_create", kTaskCreate},
    EventSpec{kStreamThread, id(EventId::task_run_begin), "task_run_begin", kTaskOnly},
    EventSpec{kStreamThread, id(EventId::task_run_end), "task_run_end", kTaskOnly},
    EventSpec{kStreamThread, id(EventId::task_wait), "task_wait", kTaskWait},
    EventSpec{kStreamThread, id(EventId::task_resolve), "task_resolve", kTaskResolve},
    EventSpec{kStreamThread, id(EventId::task_label), "task_label", kTaskLabel},
    EventSpec{kStreamThread, id(EventId::loop_suspend), "loop_suspend", {}},
    EventSpec{kStreamThread, id(EventId::loop_resume), "loop_resume", {}},
    EventSpec{kStreamStrings, id(DefinitionId::site), "site_definition", kSiteDefinition},
    EventSpec{kStreamStrings, id(DefinitionId::thread), "thread_definition", kThreadDefinition},
});

}  // namespace

std::span<const EventSpec> catalogue() {
  return kCatalogue;
}

const EventSpec* find_event(uint32_t stream_id, uint32_t event_id) {
  for (const auto& spec : kCatalogue)
    if (spec.stream_id == stream_id && spec.id == event_id) return &spec;
  return nullptr;
}

const EventTable& event_table() {
  static const EventTable table = [] {
    EventTable built;
    for (const auto& spec : kCatalogue)
      if (spec.stream_id < 2 && spec.id < kDirectLookupIds) built.by_id[spec.stream_id][spec.id] = &spec;
    return built;
  }();
  return table;
}

std::optional<size_t> payload_size(const EventSpec& spec, const uint8_t* data, size_t available) {
  if (spec.fixed_payload_size >= 0) {
    if (static_cast<size_t>(spec.fixed_payload_size) > available) return std::nullopt;
    return static_cast<size_t>(spec.fixed_payload_size);
  }
  size_t offset = 0;
  for (const auto& field : spec.fields) {
    size_t size = 0;
    switch (field.type) {
      case FieldType::u8:
        size = 1;
        break;
      case FieldType::u32:
        size = 4;
        break;
      case FieldType::u64:
      case FieldType::s64:
      case FieldType::f64:
        size = 8;
        break;
      case FieldType::string: {
        const void* nul = std::memchr(data + offset, 0, available - offset);
        if (!nul) return std::nullopt;
        size = static_cast<const uint8_t*>(nul) - (data + offset) + 1;
        break;
      }
    }
    if (size > available - offset) return std::nullopt;
    offset += size;
  }
  return offset;
}

std::string_view task_kind_name(TaskKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < std::size(kTaskKindNames) ? kTaskKindNames[index] : "unknown";
}

std::string_view task_outcome_name(TaskOutcome outcome) {
  const auto index = static_cast<size_t>(outcome);
  return index < std::size(kTaskOutcomeNames) ? kTaskOutcomeNames[index] : "?";
}

std::string_view field_type_name(FieldType type) {
  switch (type) {
    case FieldType::u8:
      return "uint8_t";
    case FieldType::u32:
      return "uint32_t";
    case FieldType::u64:
      return "uint64_t";
    case FieldType::s64:
      return "int64_t";
    case FieldType::f64:
      return "double";
    case FieldType::string:
      return "string";
  }
  return "?";
}

}  // namespace chronicle::format
