#include "format/catalogue.hpp"

#include <array>
#include <cstddef>
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
// task_invoke: task_resolve's fixed fields (its text is empty), then the run of the same task.
constexpr FieldSpec kTaskInvoke[] = {
    {"task", FieldType::u64}, {"resolver", FieldType::u64}, {"outcome", FieldType::u8, kTaskOutcomeNames}};
constexpr EventId kTaskInvokeStandsFor[] = {EventId::task_resolve, EventId::task_run_begin};
static_assert(std::size(kTaskInvokeStandsFor) == kTaskInvokeEvents);
// task_hand_over, task_return: a task's run ends into another's at one instant.
constexpr FieldSpec kTaskSwitch[] = {{"task", FieldType::u64}, {"next", FieldType::u64}};
constexpr EventId kTaskHandOverStandsFor[] = {EventId::task_wait, EventId::task_run_end, EventId::task_run_begin};
static_assert(std::size(kTaskHandOverStandsFor) == kTaskHandOverEvents);
constexpr EventId kTaskReturnStandsFor[] = {EventId::task_resolve, EventId::task_run_end, EventId::task_run_begin};
static_assert(std::size(kTaskReturnStandsFor) == kTaskReturnEvents);
constexpr FieldSpec kTaskLabel[] = {{"task", FieldType::u64}, {"text", FieldType::string}};
constexpr FieldSpec kContextSend[] = {
    {"trace_high", FieldType::u64}, {"trace_low", FieldType::u64}, {"span", FieldType::u64}, {"flags", FieldType::u8}};
constexpr FieldSpec kContextReceive[] = {{"trace_high", FieldType::u64},
                                         {"trace_low", FieldType::u64},
                                         {"span", FieldType::u64},
                                         {"parent", FieldType::u64},
                                         {"flags", FieldType::u8}};
constexpr FieldSpec kContextTracestate[] = {{"span", FieldType::u64}, {"tracestate", FieldType::string}};
constexpr std::string_view kOtlpSpanKindNames[] = {"unspecified", "internal", "server",
                                                   "client",      "producer", "consumer"};
static_assert(std::size(kOtlpSpanKindNames) == static_cast<size_t>(OtlpSpanKind::consumer) + 1);
constexpr FieldSpec kSpanContext[] = {{"trace_high", FieldType::u64},
                                      {"trace_low", FieldType::u64},
                                      {"span", FieldType::u64},
                                      {"parent", FieldType::u64},
                                      {"kind", FieldType::u8, kOtlpSpanKindNames}};
constexpr FieldSpec kContextReceiveEnd[] = {{"span", FieldType::u64}};
constexpr FieldSpec kTaskContext[] = {
    {"task", FieldType::u64}, {"trace_high", FieldType::u64}, {"trace_low", FieldType::u64}, {"flags", FieldType::u8}};
constexpr std::string_view kCpuStateNames[] = {"running", "preempted", "blocked"};
static_assert(std::size(kCpuStateNames) == kCpuStateCount);
constexpr FieldSpec kCpuSample[] = {{"pid", FieldType::u32},         {"tid", FieldType::u32},
                                    {"frame_count", FieldType::u32}, {"frames", FieldType::u64_sequence},
                                    {"stack_count", FieldType::u32}, {"stack", FieldType::u64_sequence}};
constexpr FieldSpec kCpuSwitch[] = {
    {"pid", FieldType::u32}, {"tid", FieldType::u32}, {"state", FieldType::u8, kCpuStateNames}};
constexpr FieldSpec kModuleDefinition[] = {{"base", FieldType::u64},
                                           {"start", FieldType::u64},
                                           {"end", FieldType::u64},
                                           {"build_id", FieldType::string},
                                           {"path", FieldType::string}};
constexpr std::string_view kSpanStatusNames[] = {"ok", "error"};
static_assert(std::size(kSpanStatusNames) == kSpanStatusCount);
constexpr FieldSpec kAttributeInt[] = {
    {"span_site", FieldType::u32}, {"key_id", FieldType::u32}, {"value", FieldType::s64}};
constexpr FieldSpec kAttributeUint[] = {
    {"span_site", FieldType::u32}, {"key_id", FieldType::u32}, {"value", FieldType::u64}};
constexpr FieldSpec kAttributeFloat[] = {
    {"span_site", FieldType::u32}, {"key_id", FieldType::u32}, {"value", FieldType::f64}};
constexpr FieldSpec kAttributeBool[] = {
    {"span_site", FieldType::u32}, {"key_id", FieldType::u32}, {"value", FieldType::u8}};
constexpr FieldSpec kAttributeString[] = {
    {"span_site", FieldType::u32}, {"key_id", FieldType::u32}, {"value", FieldType::string}};
constexpr FieldSpec kSpanStatus[] = {
    {"span_site", FieldType::u32}, {"status", FieldType::u8, kSpanStatusNames}, {"message", FieldType::string}};
constexpr FieldSpec kThreadDefinition[] = {{"thread_id", FieldType::u32}, {"name", FieldType::string}};

constexpr auto id(EventId e) {
  return static_cast<uint32_t>(e);
}
constexpr auto id(DefinitionId e) {
  return static_cast<uint32_t>(e);
}

constexpr bool is_variable(FieldType type) {
  return type == FieldType::string || type == FieldType::u64_sequence;
}

// Bytes of the fields before the first string or sequence (all of them when there is none).
constexpr size_t fixed_prefix_size(std::span<const FieldSpec> fields) {
  size_t size = 0;
  for (const auto& field : fields) {
    if (is_variable(field.type)) break;
    size += field_size(field.type);
  }
  return size;
}

constexpr bool has_variable_field(std::span<const FieldSpec> fields) {
  for (const auto& field : fields)
    if (is_variable(field.type)) return true;
  return false;
}

// A sequence's length is the u32 right before it.
constexpr bool sequences_have_lengths(std::span<const FieldSpec> fields) {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].type == FieldType::u64_sequence && (i == 0 || fields[i - 1].type != FieldType::u32)) return false;
  return true;
}

constexpr int32_t fixed_size(std::span<const FieldSpec> fields) {
  return has_variable_field(fields) ? -1 : static_cast<int32_t>(fixed_prefix_size(fields));
}

// Where `name` begins in the payload; -1 when it is not a field before the first string.
constexpr std::ptrdiff_t field_offset(std::span<const FieldSpec> fields, std::string_view name) {
  std::ptrdiff_t offset = 0;
  for (const auto& field : fields) {
    if (is_variable(field.type)) return -1;
    if (field.name == name) return offset;
    offset += static_cast<std::ptrdiff_t>(field_size(field.type));
  }
  return -1;
}

// The packed payload structs of layout.hpp, which the writer fills and the reader reads, are the
// fields declared here to CTF readers: same offsets, same fixed size.
#define CHRONICLE_SAME_FIELD(fields, Struct, member)                                                    \
  static_assert(field_offset(fields, #member) == static_cast<std::ptrdiff_t>(offsetof(Struct, member)), \
                #Struct "::" #member " is not where the catalogue declares it")
#define CHRONICLE_SAME_SIZE(fields, Struct) \
  static_assert(fixed_prefix_size(fields) == sizeof(Struct), #Struct " is not the catalogue's fixed fields")

CHRONICLE_SAME_FIELD(kNameOnly, NamePayload, name_id);
CHRONICLE_SAME_SIZE(kNameOnly, NamePayload);
CHRONICLE_SAME_FIELD(kNote, NotePrefix, name_id);
CHRONICLE_SAME_SIZE(kNote, NotePrefix);
CHRONICLE_SAME_FIELD(kCounter, CounterPayload, name_id);
CHRONICLE_SAME_FIELD(kCounter, CounterPayload, value);
CHRONICLE_SAME_SIZE(kCounter, CounterPayload);
CHRONICLE_SAME_FIELD(kCounterFloat, CounterFloatPayload, name_id);
CHRONICLE_SAME_FIELD(kCounterFloat, CounterFloatPayload, value);
CHRONICLE_SAME_SIZE(kCounterFloat, CounterFloatPayload);
CHRONICLE_SAME_FIELD(kTaskCreate, TaskCreatePayload, task);
CHRONICLE_SAME_FIELD(kTaskCreate, TaskCreatePayload, parent);
CHRONICLE_SAME_FIELD(kTaskCreate, TaskCreatePayload, kind);
CHRONICLE_SAME_FIELD(kTaskCreate, TaskCreatePayload, name_id);
CHRONICLE_SAME_SIZE(kTaskCreate, TaskCreatePayload);
CHRONICLE_SAME_FIELD(kTaskOnly, TaskPayload, task);
CHRONICLE_SAME_SIZE(kTaskOnly, TaskPayload);
CHRONICLE_SAME_FIELD(kTaskWait, TaskWaitPayload, task);
CHRONICLE_SAME_FIELD(kTaskWait, TaskWaitPayload, awaited);
CHRONICLE_SAME_SIZE(kTaskWait, TaskWaitPayload);
CHRONICLE_SAME_FIELD(kTaskResolve, TaskResolvePrefix, task);
CHRONICLE_SAME_FIELD(kTaskResolve, TaskResolvePrefix, resolver);
CHRONICLE_SAME_FIELD(kTaskResolve, TaskResolvePrefix, outcome);
CHRONICLE_SAME_SIZE(kTaskResolve, TaskResolvePrefix);
CHRONICLE_SAME_FIELD(kTaskInvoke, TaskInvokePayload, task);
CHRONICLE_SAME_FIELD(kTaskInvoke, TaskInvokePayload, resolver);
CHRONICLE_SAME_FIELD(kTaskInvoke, TaskInvokePayload, outcome);
CHRONICLE_SAME_SIZE(kTaskInvoke, TaskInvokePayload);
CHRONICLE_SAME_FIELD(kTaskSwitch, TaskSwitchPayload, task);
CHRONICLE_SAME_FIELD(kTaskSwitch, TaskSwitchPayload, next);
CHRONICLE_SAME_SIZE(kTaskSwitch, TaskSwitchPayload);
CHRONICLE_SAME_FIELD(kTaskLabel, TaskLabelPrefix, task);
CHRONICLE_SAME_SIZE(kTaskLabel, TaskLabelPrefix);
CHRONICLE_SAME_FIELD(kContextSend, ContextSendPayload, trace_high);
CHRONICLE_SAME_FIELD(kContextSend, ContextSendPayload, trace_low);
CHRONICLE_SAME_FIELD(kContextSend, ContextSendPayload, span);
CHRONICLE_SAME_FIELD(kContextSend, ContextSendPayload, flags);
CHRONICLE_SAME_SIZE(kContextSend, ContextSendPayload);
CHRONICLE_SAME_FIELD(kContextReceive, ContextReceivePayload, trace_high);
CHRONICLE_SAME_FIELD(kContextReceive, ContextReceivePayload, trace_low);
CHRONICLE_SAME_FIELD(kContextReceive, ContextReceivePayload, span);
CHRONICLE_SAME_FIELD(kContextReceive, ContextReceivePayload, parent);
CHRONICLE_SAME_FIELD(kContextReceive, ContextReceivePayload, flags);
CHRONICLE_SAME_SIZE(kContextReceive, ContextReceivePayload);
CHRONICLE_SAME_FIELD(kSpanContext, SpanContextPayload, trace_high);
CHRONICLE_SAME_FIELD(kSpanContext, SpanContextPayload, trace_low);
CHRONICLE_SAME_FIELD(kSpanContext, SpanContextPayload, span);
CHRONICLE_SAME_FIELD(kSpanContext, SpanContextPayload, parent);
CHRONICLE_SAME_FIELD(kSpanContext, SpanContextPayload, kind);
CHRONICLE_SAME_SIZE(kSpanContext, SpanContextPayload);
CHRONICLE_SAME_FIELD(kContextReceiveEnd, ContextReceiveEndPayload, span);
CHRONICLE_SAME_SIZE(kContextReceiveEnd, ContextReceiveEndPayload);
CHRONICLE_SAME_FIELD(kTaskContext, TaskContextPayload, task);
CHRONICLE_SAME_FIELD(kTaskContext, TaskContextPayload, trace_high);
CHRONICLE_SAME_FIELD(kTaskContext, TaskContextPayload, trace_low);
CHRONICLE_SAME_FIELD(kTaskContext, TaskContextPayload, flags);
CHRONICLE_SAME_SIZE(kTaskContext, TaskContextPayload);
CHRONICLE_SAME_FIELD(kCpuSample, CpuSamplePrefix, pid);
CHRONICLE_SAME_FIELD(kCpuSample, CpuSamplePrefix, tid);
CHRONICLE_SAME_FIELD(kCpuSample, CpuSamplePrefix, frame_count);
CHRONICLE_SAME_SIZE(kCpuSample, CpuSamplePrefix);
static_assert(sequences_have_lengths(kCpuSample));
CHRONICLE_SAME_FIELD(kCpuSwitch, CpuSwitchPayload, pid);
CHRONICLE_SAME_FIELD(kCpuSwitch, CpuSwitchPayload, tid);
CHRONICLE_SAME_FIELD(kCpuSwitch, CpuSwitchPayload, state);
CHRONICLE_SAME_SIZE(kCpuSwitch, CpuSwitchPayload);
CHRONICLE_SAME_FIELD(kAttributeInt, AttributeIntPayload, key_id);
CHRONICLE_SAME_FIELD(kAttributeInt, AttributeIntPayload, value);
CHRONICLE_SAME_SIZE(kAttributeInt, AttributeIntPayload);
CHRONICLE_SAME_FIELD(kAttributeUint, AttributeUintPayload, value);
CHRONICLE_SAME_SIZE(kAttributeUint, AttributeUintPayload);
CHRONICLE_SAME_FIELD(kAttributeFloat, AttributeFloatPayload, value);
CHRONICLE_SAME_SIZE(kAttributeFloat, AttributeFloatPayload);
CHRONICLE_SAME_FIELD(kAttributeBool, AttributeBoolPayload, value);
CHRONICLE_SAME_SIZE(kAttributeBool, AttributeBoolPayload);
CHRONICLE_SAME_FIELD(kAttributeString, AttributeStringPrefix, key_id);
CHRONICLE_SAME_SIZE(kAttributeString, AttributeStringPrefix);
CHRONICLE_SAME_FIELD(kSpanStatus, SpanStatusPrefix, status);
CHRONICLE_SAME_SIZE(kSpanStatus, SpanStatusPrefix);
CHRONICLE_SAME_FIELD(kContextTracestate, ContextTracestatePrefix, span);
CHRONICLE_SAME_SIZE(kContextTracestate, ContextTracestatePrefix);
CHRONICLE_SAME_FIELD(kModuleDefinition, ModuleDefinitionPrefix, base);
CHRONICLE_SAME_FIELD(kModuleDefinition, ModuleDefinitionPrefix, start);
CHRONICLE_SAME_FIELD(kModuleDefinition, ModuleDefinitionPrefix, end);
CHRONICLE_SAME_SIZE(kModuleDefinition, ModuleDefinitionPrefix);
#undef CHRONICLE_SAME_FIELD
#undef CHRONICLE_SAME_SIZE

constexpr auto with_sizes(auto catalogue) {
  for (auto& spec : catalogue) spec.fixed_payload_size = fixed_size(spec.fields);
  return catalogue;
}

constexpr std::array kCatalogue = with_sizes(std::array{
    EventSpec{kStreamThread, id(EventId::span_begin), "span_begin", kNameOnly},
    EventSpec{kStreamThread, id(EventId::span_end), "span_end", kNameOnly},
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
    EventSpec{kStreamThread, id(EventId::context_send), "context_send", kContextSend},
    EventSpec{kStreamThread, id(EventId::context_receive), "context_receive", kContextReceive},
    EventSpec{kStreamThread, id(EventId::context_receive_end), "context_receive_end", kContextReceiveEnd},
    EventSpec{kStreamThread, id(EventId::task_context), "task_context", kTaskContext},
    EventSpec{kStreamThread, id(EventId::cpu_sample), "cpu_sample", kCpuSample},
    EventSpec{kStreamThread, id(EventId::cpu_switch), "cpu_switch", kCpuSwitch},
    EventSpec{kStreamThread, id(EventId::attribute_int), "attribute_int", kAttributeInt},
    EventSpec{kStreamThread, id(EventId::attribute_uint), "attribute_uint", kAttributeUint},
    EventSpec{kStreamThread, id(EventId::attribute_float), "attribute_float", kAttributeFloat},
    EventSpec{kStreamThread, id(EventId::attribute_bool), "attribute_bool", kAttributeBool},
    EventSpec{kStreamThread, id(EventId::attribute_string), "attribute_string", kAttributeString},
    EventSpec{kStreamThread, id(EventId::span_status), "span_status", kSpanStatus},
    EventSpec{kStreamThread, id(EventId::context_tracestate), "context_tracestate", kContextTracestate},
    EventSpec{kStreamThread, id(EventId::span_context), "span_context", kSpanContext},
    EventSpec{kStreamThread, id(EventId::task_invoke), "task_invoke", kTaskInvoke, -1, kTaskInvokeStandsFor},
    EventSpec{kStreamThread, id(EventId::task_hand_over), "task_hand_over", kTaskSwitch, -1, kTaskHandOverStandsFor},
    EventSpec{kStreamThread, id(EventId::task_return), "task_return", kTaskSwitch, -1, kTaskReturnStandsFor},
    EventSpec{kStreamStrings, id(DefinitionId::site), "site_definition", kSiteDefinition},
    EventSpec{kStreamStrings, id(DefinitionId::thread), "thread_definition", kThreadDefinition},
    EventSpec{kStreamStrings, id(DefinitionId::module), "module_definition", kModuleDefinition},
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
  uint32_t last_u32 = 0;  // a sequence's length
  for (const auto& field : spec.fields) {
    size_t size = field_size(field.type);
    if (field.type == FieldType::string) {
      const void* nul = std::memchr(data + offset, 0, available - offset);
      if (!nul) return std::nullopt;
      size = static_cast<const uint8_t*>(nul) - (data + offset) + 1;
    } else if (field.type == FieldType::u64_sequence) {
      if (last_u32 > (available - offset) / 8) return std::nullopt;
      size = size_t{last_u32} * 8;
    }
    if (size > available - offset) return std::nullopt;
    if (field.type == FieldType::u32) std::memcpy(&last_u32, data + offset, sizeof last_u32);
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

std::string_view cpu_state_name(CpuState state) {
  const auto index = static_cast<size_t>(state);
  return index < std::size(kCpuStateNames) ? kCpuStateNames[index] : "?";
}

std::string_view otlp_span_kind_name(uint8_t kind) {
  return kind < std::size(kOtlpSpanKindNames) ? kOtlpSpanKindNames[kind] : "?";
}

std::string_view field_type_name(FieldType type) {
  switch (type) {
    case FieldType::u8:
      return "uint8_t";
    case FieldType::u32:
      return "uint32_t";
    case FieldType::u64:
    case FieldType::u64_sequence:
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
