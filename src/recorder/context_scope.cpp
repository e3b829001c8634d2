// The trace context in scope (chronicle/detail/context_state.hpp) and the calls that record sends
// and receives (chronicle/context.hpp). Context events share the "task" category's switch: they
// are what ties tasks of several processes together.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "chronicle/context.hpp"
#include "chronicle/detail/context_state.hpp"

#ifndef CHRONICLE_DISABLE
#include "chronicle/detail/task_writer.hpp"
#endif

namespace chronicle {

namespace detail {

static_assert(kSampledTraceFlag == TraceContext::kSampledFlag);

thread_local constinit ContextThreadState t_context __attribute__((tls_model("initial-exec"))) = {};
std::atomic<uint64_t> g_context_salt_high{0};
std::atomic<uint64_t> g_context_salt_low{0};

namespace {

uint64_t load_big_endian(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = value << 8 | bytes[i];
  return value;
}

void store_big_endian(uint64_t value, uint8_t* out) {
  for (int i = 7; i >= 0; --i, value >>= 8) out[i] = static_cast<uint8_t>(value);
}

ContextSlot slot_of(const TraceContext& context) {
  return {load_big_endian(context.trace_id.data()), load_big_endian(context.trace_id.data() + 8),
          load_big_endian(context.span_id.data()), context.flags, true};
}

TraceContext context_of(const ContextSlot& slot) {
  TraceContext context;
  store_big_endian(slot.trace_high, context.trace_id.data());
  store_big_endian(slot.trace_low, context.trace_id.data() + 8);
  store_big_endian(slot.span, context.span_id.data());
  context.flags = slot.flags;
  return context;
}

// Interned tracestates: a slot is plain data copied into every task, so it names a tracestate by
// its index here. Strings are kept for the process's life; the table is bounded (kMaxTracestates
// entries of at most 512 characters), and a tracestate that does not fit, or comes while another
// thread is interning one (never waited for: a ReceiveScope must not block), is not carried on.
constexpr uint32_t kMaxTracestates = 1024;
std::atomic<const std::string*> g_tracestates[kMaxTracestates + 1];  // [0] unused: 0 means none
std::mutex g_tracestate_mutex;                                       // guards the map and the count
// Never destroyed: a ReceiveScope may open in a thread still running while the process exits.
std::unordered_map<std::string_view, uint32_t>* g_tracestate_index = nullptr;
uint32_t g_tracestate_count = 0;

}  // namespace

#ifndef CHRONICLE_DISABLE
void emit_task_context(ThreadWriter& writer, uint64_t task, const ContextSlot& slot) {
  const format::TaskContextPayload payload{task, slot.trace_high, slot.trace_low, slot.flags};
  emit_fixed(writer, format::EventId::task_context, &payload, sizeof payload);
}
#endif

uint32_t intern_tracestate(std::string_view tracestate) {
  if (tracestate.empty()) return 0;
  std::unique_lock lock(g_tracestate_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return 0;
  if (!g_tracestate_index) g_tracestate_index = new std::unordered_map<std::string_view, uint32_t>;
  if (const auto found = g_tracestate_index->find(tracestate); found != g_tracestate_index->end()) return found->second;
  if (g_tracestate_count == kMaxTracestates) return 0;
  const auto* kept = new std::string(tracestate);
  const uint32_t index = ++g_tracestate_count;
  g_tracestates[index].store(kept, std::memory_order_release);  // pairs with interned_tracestate's acquire
  g_tracestate_index->emplace(*kept, index);
  return index;
}

std::string_view interned_tracestate(uint32_t index) {
  if (index == 0 || index > kMaxTracestates) return {};
  const std::string* kept = g_tracestates[index].load(std::memory_order_acquire);
  return kept ? std::string_view(*kept) : std::string_view{};
}

bool implicit_thread_context([[maybe_unused]] ContextSlot& out) {
#ifndef CHRONICLE_DISABLE
  if (t_context.current != nullptr || t_context.own.set) return false;
  const ThreadWriter& writer = t_writer;
  if (writer.open_thread_spans == 0 || writer.generation == 0 ||
      writer.generation != g_generation.load(std::memory_order_relaxed))
    return false;
  const format::ContextSalt salt{g_context_salt_high.load(std::memory_order_relaxed),
                                 g_context_salt_low.load(std::memory_order_relaxed)};
  // The thread id the reader sees: the channel's (session_channels.cpp names it by gettid).
  const auto thread_id = static_cast<uint32_t>(syscall(SYS_gettid));
  out = ContextSlot{};
  format::derived_root_trace_id(salt, thread_id, writer.outer_span_ticks, out.trace_high, out.trace_low);
  out.span = format::derived_root_span_id(salt, thread_id, writer.outer_span_ticks);
  out.flags = kSampledTraceFlag;
  out.set = true;
  return true;
#else
  return false;
#endif
}

void record_inherited_context([[maybe_unused]] uint64_t task) {
#ifndef CHRONICLE_DISABLE
  const ContextSlot& scope = current_context_slot();
  if (!scope.set) return;
  if (ThreadWriter* writer = task_writer()) emit_task_context(*writer, task, scope);
#endif
}

}  // namespace detail

TraceContext current_context() {
  detail::ContextSlot implicit;
  const detail::ContextSlot* slot = &detail::current_context_slot();
  if (!slot->set) {
    if (!detail::implicit_thread_context(implicit)) return {};
    slot = &implicit;
  }
  TraceContext context = detail::context_of(*slot);
  context.tracestate = detail::interned_tracestate(slot->tracestate);
  return context;
}

std::string send_traceparent() {
  // The context in scope, else the thread's outermost span's (current_context); else a new trace.
  const TraceContext in_scope = current_context();
  const TraceContext send = in_scope.valid() ? in_scope.child() : TraceContext::new_trace();
#ifndef CHRONICLE_DISABLE
  if (detail::ThreadWriter* writer = detail::task_writer()) {
    const detail::ContextSlot ids = detail::slot_of(send);
    const format::ContextSendPayload payload{ids.trace_high, ids.trace_low, ids.span, ids.flags};
    detail::emit_fixed(*writer, format::EventId::context_send, &payload, sizeof payload);
  }
#endif
  return send.traceparent();
}

ReceiveScope::ReceiveScope(std::string_view traceparent, std::string_view tracestate) {
  TraceContext::ParseResult parsed = TraceContext::parse_with_reason(traceparent, tracestate);
  why_ = parsed.error;
  open(parsed.context);
}

ReceiveScope::ReceiveScope(const TraceContext& sender) {
  if (!sender.valid()) why_ = "the sender's context is not valid";
  open(sender.valid() ? std::optional<TraceContext>(sender) : std::nullopt);
}

ReceiveScope::ReceiveScope(NewTrace start) {
  why_ = "a new trace was asked for";
  open(std::nullopt, start.sampled);
}

void ReceiveScope::open(const std::optional<TraceContext>& sender, bool sampled) {
  continued_ = sender.has_value();
  context_ = continued_ ? sender->child() : TraceContext::new_trace(sampled);
  detail::ContextSlot& slot = detail::current_context_slot();
  slot_ = &slot;
  if (&slot == &detail::t_context.own) owning_thread_ = &detail::t_context;
  static_assert(sizeof(detail::ContextSlot) <= sizeof saved_slot_ && std::is_trivially_copyable_v<detail::ContextSlot>);
  std::memcpy(saved_slot_, &slot, sizeof slot);
  slot = detail::slot_of(context_);
  slot.tracestate = detail::intern_tracestate(context_.tracestate);
#ifndef CHRONICLE_DISABLE
  if (detail::ThreadWriter* writer = detail::task_writer()) {
    const uint64_t parent = continued_ ? detail::load_big_endian(sender->span_id.data()) : 0;
    const format::ContextReceivePayload payload{slot.trace_high, slot.trace_low, slot.span, parent, slot.flags};
    detail::emit_fixed(*writer, format::EventId::context_receive, &payload, sizeof payload);
    if (!context_.tracestate.empty()) {
      const format::ContextTracestatePrefix fixed{slot.span};
      detail::emit_with_text(*writer, detail::g_task_site.category_index, format::EventId::context_tracestate, &fixed,
                             sizeof fixed, context_.tracestate.data(), context_.tracestate.size());
    }
    generation_ = writer->generation;
  }
#endif
}

ReceiveScope::~ReceiveScope() {
  auto& slot = *static_cast<detail::ContextSlot*>(slot_);
#ifndef CHRONICLE_DISABLE
  // Ended in the session it began in only: a receive begun before a restart has no begin there.
  if (generation_ != 0 && generation_ == detail::g_generation.load(std::memory_order_relaxed)) {
    if (detail::ThreadWriter* writer = detail::task_writer()) {
      const format::ContextReceiveEndPayload payload{detail::load_big_endian(context_.span_id.data())};
      detail::emit_fixed(*writer, format::EventId::context_receive_end, &payload, sizeof payload);
    }
  }
#endif
  // A thread's own slot is restored only on that thread: elsewhere it may be in use, or gone.
  if (owning_thread_ && owning_thread_ != &detail::t_context) return;
  std::memcpy(&slot, saved_slot_, sizeof slot);
}

}  // namespace chronicle
