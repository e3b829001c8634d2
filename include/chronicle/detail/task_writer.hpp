// The hot path of the task layer: task ids, the thread's current task, and the task events.
// Like writer.hpp, header-only for inlining; the rare work lives in src/recorder/tasks.cpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "chronicle/detail/context_state.hpp"
#include "chronicle/detail/writer.hpp"

namespace chronicle::detail {

// Per thread: the next task id to hand out and the task running now. Trivial, so the
// thread_local needs no guard.
struct TaskThreadState {
  uint64_t next_id;  // 0 until the thread made its first task
  uint64_t current;  // 0: no task runs on this thread
  // The task whose awaiter's await_suspend runs on this thread (0: none), and when its run ended
  // (0: not recorded): the tasks it creates meanwhile are work it waits on (record_new_task).
  uint64_t suspending;
  uint64_t suspended_at;
};
extern thread_local constinit TaskThreadState t_tasks __attribute__((tls_model("initial-exec")));

// Every task event goes through this one site: its category ("task") switches them all, and
// writer_for() needs a site to check it.
extern Site g_task_site;

// Slow paths (src/recorder/tasks.cpp).
uint64_t first_task_id_of_thread();
// The interned name of a task made at a source location; `function` is a signature that is
// shortened once ("chronicle::task<int> ns::read(int)" -> "ns::read").
uint32_t intern_task_name_slow(const char* function, const char* file, uint32_t line);
// The interned name "object.operation" (plus " in composed" when given) of an Asio operation.
uint32_t intern_operation_name_slow(const char* object, const char* operation, const char* composed);
// The interned name of a task named by a string with static storage.
uint32_t intern_literal_name_slow(const char* name);

// Ids are unique in the process without any shared write: the thread's index sits in the top
// 24 bits, its own counter in the low 40.
inline constexpr unsigned kTaskCounterBits = 40;

CHRONICLE_INLINE uint64_t new_task_id() {
  uint64_t id = t_tasks.next_id;
  if (id == 0) [[unlikely]]
    id = first_task_id_of_thread();
  t_tasks.next_id = id + 1;
  return id;
}

// A small per-thread cache in front of the interning slow paths, keyed by the addresses of the
// static strings that name a task (literal, source location or Asio operation), so a task's
// creation costs no lock and no hashing of text.
struct TaskNameCacheEntry {
  const void* first;
  const void* second;
  const void* third;
  uint32_t line;
  uint32_t id;
};
inline constexpr size_t kTaskNameCacheSize = 64;
extern thread_local constinit TaskNameCacheEntry t_task_names[kTaskNameCacheSize]
    __attribute__((tls_model("initial-exec")));

CHRONICLE_INLINE TaskNameCacheEntry& task_name_slot(const void* first, const void* second, const void* third,
                                                    uint32_t line) {
  uintptr_t mixed = reinterpret_cast<uintptr_t>(first) ^ (reinterpret_cast<uintptr_t>(second) >> 3) ^
                    (reinterpret_cast<uintptr_t>(third) >> 5) ^ line;
  mixed ^= mixed >> 7;
  mixed ^= mixed >> 13;
  return t_task_names[mixed % kTaskNameCacheSize];
}

CHRONICLE_INLINE uint32_t task_name_from_location(const char* function, const char* file, uint32_t line) {
  TaskNameCacheEntry& slot = task_name_slot(function, file, nullptr, line);
  if (slot.first == function && slot.second == file && slot.third == nullptr && slot.line == line) [[likely]]
    return slot.id;
  const uint32_t id = intern_task_name_slow(function, file, line);
  slot = {function, file, nullptr, line, id};
  return id;
}

// Line ~0 marks the entries of operation names, so they never match a location's.
inline constexpr uint32_t kOperationNameLine = ~uint32_t{0};

CHRONICLE_INLINE uint32_t task_name_from_operation(const char* object, const char* operation, const char* composed) {
  TaskNameCacheEntry& slot = task_name_slot(object, operation, composed, kOperationNameLine);
  if (slot.first == object && slot.second == operation && slot.third == composed && slot.line == kOperationNameLine)
      [[likely]]
    return slot.id;
  const uint32_t id = intern_operation_name_slow(object, operation, composed);
  slot = {object, operation, composed, kOperationNameLine, id};
  return id;
}

// Line ~0 - 1 marks literal names.
inline constexpr uint32_t kLiteralNameLine = ~uint32_t{0} - 1;

CHRONICLE_INLINE uint32_t task_name_from_literal(const char* name) {
  TaskNameCacheEntry& slot = task_name_slot(name, nullptr, nullptr, kLiteralNameLine);
  if (slot.first == name && slot.second == nullptr && slot.line == kLiteralNameLine) [[likely]]
    return slot.id;
  const uint32_t id = intern_literal_name_slow(name);
  slot = {name, nullptr, nullptr, kLiteralNameLine, id};
  return id;
}

// The writer for a task event, or nullptr when tracing is off (one load and one branch) or the
// "task" category is.
CHRONICLE_INLINE ThreadWriter* task_writer(uint32_t generation) {
  if (generation == 0) [[likely]]
    return nullptr;
  return writer_for(g_task_site, generation);
}
CHRONICLE_INLINE ThreadWriter* task_writer() {
  return task_writer(g_generation.load(std::memory_order_relaxed));
}

// Writes an event whose payload is `size` bytes of fixed fields at `ticks` (or the thread's last
// event's, if later); returns the time written, 0 when the event was dropped.
CHRONICLE_INLINE uint64_t emit_fixed_at(ThreadWriter& writer, format::EventId event, const void* payload, size_t size,
                                        uint64_t ticks) {
  uint8_t* out = begin_event(writer, g_task_site.category_index, static_cast<uint32_t>(event), size, ticks);
  if (!out) return 0;
  if (size > 0) std::memcpy(out, payload, size);
  commit_event(writer, g_task_site.category_index, out + size, ticks);
  return ticks;
}

CHRONICLE_INLINE void emit_fixed(ThreadWriter& writer, format::EventId event, const void* payload, size_t size) {
  emit_fixed_at(writer, event, payload, size, read_ticks());
}

CHRONICLE_INLINE void emit_task_create(ThreadWriter& writer, uint64_t task, uint64_t parent, format::TaskKind kind,
                                       uint32_t name_id) {
  const format::TaskCreatePayload payload{task, parent, static_cast<uint8_t>(kind), name_id};
  emit_fixed(writer, format::EventId::task_create, &payload, sizeof payload);
}

CHRONICLE_INLINE void emit_task_event(format::EventId event, uint64_t task) {
  if (ThreadWriter* writer = task_writer()) [[unlikely]] {
    const format::TaskPayload payload{task};
    emit_fixed(*writer, event, &payload, sizeof payload);
  }
}

// A run's end whose time the caller keeps (0: nothing recorded).
CHRONICLE_INLINE uint64_t emit_task_run_end_timed(uint64_t task) {
  if (ThreadWriter* writer = task_writer()) [[unlikely]] {
    const format::TaskPayload payload{task};
    return emit_fixed_at(*writer, format::EventId::task_run_end, &payload, sizeof payload, read_ticks());
  }
  return 0;
}

CHRONICLE_INLINE void emit_task_pair(format::EventId event, uint64_t task, uint64_t other) {
  if (ThreadWriter* writer = task_writer()) [[unlikely]] {
    const format::TaskWaitPayload payload{task, other};
    emit_fixed(*writer, event, &payload, sizeof payload);
  }
}

CHRONICLE_INLINE void emit_loop_event(format::EventId event) {
  if (ThreadWriter* writer = task_writer()) [[unlikely]]
    emit_fixed(*writer, event, nullptr, 0);
}

// A resolution without text (most are: every success) stays inline: its size is fixed.
#pragma pack(push, 1)
struct QuietResolve {
  format::TaskResolvePrefix fields;
  char empty_text;
};
#pragma pack(pop)

CHRONICLE_INLINE void emit_task_resolve_quiet(ThreadWriter& writer, uint64_t task, uint64_t resolver,
                                              format::TaskOutcome outcome) {
  const QuietResolve payload{{task, resolver, static_cast<uint8_t>(outcome)}, 0};
  emit_fixed(writer, format::EventId::task_resolve, &payload, sizeof payload);
}

// Task events that happen at one instant (a coroutine handing over to another: its wait, its
// run's end and the other's run's beginning) share one clock read, which is most of an event's
// cost, and are written as one EventGroup: one entry into the trace point, one check for room,
// one commit. A batch writes at most kMaxEvents events; between its first event and its end
// (its destructor) the caller does nothing that may block or take a lock (EventGroup).
class TaskEventBatch {
 public:
  static constexpr size_t kMaxEvents = 4;

  CHRONICLE_INLINE TaskEventBatch() : TaskEventBatch(g_generation.load(std::memory_order_relaxed)) {}
  CHRONICLE_INLINE ~TaskEventBatch() {}  // NOLINT: not = default, so the group's commit is inlined
  TaskEventBatch(const TaskEventBatch&) = delete;
  TaskEventBatch& operator=(const TaskEventBatch&) = delete;
  // The events go at `ticks` (or the thread's last event's, if later) instead of now.
  CHRONICLE_INLINE TaskEventBatch(ThreadWriter& writer, uint64_t ticks)
      : mode_(Mode::group), group_(&writer, g_task_site.category_index, ticks) {}
  CHRONICLE_INLINE bool active() const { return mode_ != Mode::off; }
  CHRONICLE_INLINE void task_event(format::EventId event, uint64_t task) {
    if (!active() || task == 0) return;
    const format::TaskPayload payload{task};
    write(event, &payload, sizeof payload);
  }
  CHRONICLE_INLINE void create(uint64_t task, uint64_t parent, format::TaskKind kind, uint32_t name_id) {
    if (!active() || task == 0) return;
    const format::TaskCreatePayload payload{task, parent, static_cast<uint8_t>(kind), name_id};
    write(format::EventId::task_create, &payload, sizeof payload);
  }
  CHRONICLE_INLINE void wait(uint64_t task, uint64_t awaited) {
    if (!active() || task == 0 || awaited == 0) return;
    const format::TaskWaitPayload payload{task, awaited};
    write(format::EventId::task_wait, &payload, sizeof payload);
  }
  CHRONICLE_INLINE void resolve_quiet(uint64_t task, uint64_t resolver, format::TaskOutcome outcome) {
    if (!active() || task == 0) return;
    const QuietResolve payload{{task, resolver, static_cast<uint8_t>(outcome)}, 0};
    write(format::EventId::task_resolve, &payload, sizeof payload);
  }
  // resolve_quiet(task, ...) and then task_event(task_run_begin, task), as one compound event
  // (task_invoke) when the batch writes a group.
  CHRONICLE_INLINE void invoke(uint64_t task, uint64_t resolver, format::TaskOutcome outcome) {
    if (!active() || task == 0) return;
    if (mode_ != Mode::group) [[unlikely]] {
      resolve_quiet(task, resolver, outcome);
      task_event(format::EventId::task_run_begin, task);
      return;
    }
    const format::TaskInvokePayload payload{task, resolver, static_cast<uint8_t>(outcome)};
    if (uint8_t* out = group_.add(static_cast<uint32_t>(format::EventId::task_invoke), sizeof payload,
                                  format::kTaskInvokeEvents)) [[likely]]
      std::memcpy(out, &payload, sizeof payload);
  }
  // wait(task, next), task_event(task_run_end, task) and task_event(task_run_begin, next): one
  // task_hand_over when the batch writes a group and both tasks are recorded.
  CHRONICLE_INLINE void hand_over(uint64_t task, uint64_t next) {
    if (!switch_in_one(format::EventId::task_hand_over, format::kTaskHandOverEvents, task, next)) {
      wait(task, next);
      task_event(format::EventId::task_run_end, task);
      task_event(format::EventId::task_run_begin, next);
    }
  }
  // resolve_quiet(task, task, ok), task_event(task_run_end, task) and task_event(task_run_begin,
  // next): one task_return when the batch writes a group and both tasks are recorded.
  CHRONICLE_INLINE void return_to(uint64_t task, uint64_t next) {
    if (!switch_in_one(format::EventId::task_return, format::kTaskReturnEvents, task, next)) {
      resolve_quiet(task, task, format::TaskOutcome::ok);
      task_event(format::EventId::task_run_end, task);
      task_event(format::EventId::task_run_begin, next);
    }
  }

 private:
  // The most a batch writes: kMaxEvents of the largest task event, each with a full header.
  static constexpr size_t kMaxBytes = kMaxEvents * (format::kExtendedHeaderSize + sizeof(format::TaskCreatePayload));
  static_assert(sizeof(format::TaskCreatePayload) >= sizeof(QuietResolve) &&
                sizeof(format::TaskCreatePayload) >= sizeof(format::TaskWaitPayload));

  // off: not tracing. group: the events go as one EventGroup. one_by_one: tracing, but no writer
  // (the task category is off, or the thread's or the site's first use came inside a trace point,
  // a signal handler, and that lookup dropped and counted one event, the batch's first:
  // one_by_one_first_counted); the events go one by one, each looked up and counted as it would be
  // on its own.
  enum class Mode : uint8_t { off, group, one_by_one, one_by_one_first_counted };
  static CHRONICLE_INLINE Mode mode_for(uint32_t generation, const ThreadWriter* writer) {
    if (writer) return Mode::group;
    if (generation == 0) [[likely]]
      return Mode::off;
    return t_writer.state.load(std::memory_order_relaxed) != kOutsideTracePoint ? Mode::one_by_one_first_counted
                                                                                : Mode::one_by_one;
  }

  CHRONICLE_INLINE explicit TaskEventBatch(uint32_t generation) : TaskEventBatch(generation, task_writer(generation)) {}
  CHRONICLE_INLINE TaskEventBatch(uint32_t generation, ThreadWriter* writer)
      : mode_(mode_for(generation, writer)),
        group_(writer, writer ? g_task_site.category_index : 0, writer ? read_ticks() : 0) {}

  // Writes a task_hand_over or task_return; false (nothing written) when it cannot stand for the
  // three events (a task not recorded, no group).
  CHRONICLE_INLINE bool switch_in_one(format::EventId event, uint32_t events, uint64_t task, uint64_t next) {
    if (mode_ != Mode::group || task == 0 || next == 0) return false;
    const format::TaskSwitchPayload payload{task, next};
    if (uint8_t* out = group_.add(static_cast<uint32_t>(event), sizeof payload, events)) [[likely]]
      std::memcpy(out, &payload, sizeof payload);
    return true;
  }

  CHRONICLE_INLINE void write(format::EventId event, const void* payload, size_t size) {
    if (mode_ == Mode::group) [[likely]] {
      if (uint8_t* out = group_.add(static_cast<uint32_t>(event), size)) [[likely]]
        std::memcpy(out, payload, size);
      return;
    }
    if (mode_ == Mode::one_by_one_first_counted)
      mode_ = Mode::one_by_one;
    else if (ThreadWriter* writer = task_writer())
      emit_fixed(*writer, event, payload, size);
  }
  Mode mode_;
  EventGroup<kMaxBytes> group_;
};

// Records `task`, just made by the task whose await_suspend runs on this thread (`parent`, see
// TaskThreadState::suspending): the work the awaiter started (a post, a timer, an operation, a
// chronicle::resumption), which `parent` waits on until it completes. Created at the instant the
// parent's run ended, so that no gap opens between the two (the awaiter's own code runs in it).
CHRONICLE_INLINE void emit_work_of_suspending_task(ThreadWriter& writer, uint64_t task, uint64_t parent,
                                                   format::TaskKind kind, uint32_t name_id) {
  TaskEventBatch batch(writer, t_tasks.suspended_at != 0 ? t_tasks.suspended_at : read_ticks());
  batch.create(task, parent, kind, name_id);
  batch.wait(parent, task);
}

// Records the trace `slot` holds as `task`'s (src/recorder/context_scope.cpp).
void emit_task_context(ThreadWriter& writer, uint64_t task, const ContextSlot& slot);

// Fills the slot of a task that carries its context (a coroutine, an Asio handler), just recorded
// as created by `writer`'s thread with id `task` under `parent`: the context in scope, else a trace
// of its own, with a span id derived from the task's; and records the trace when the reader could
// not derive it (it derives a task's trace from its id when the task has no parent, else takes its
// parent's; a context in scope was recorded at the creation already, see create_task()).
CHRONICLE_INLINE void capture_created_task_context(ThreadWriter& writer, uint64_t task, uint64_t parent,
                                                   ContextSlot& slot) {
  const ContextSlot& scope = current_context_slot();
  const format::ContextSalt salt{g_context_salt_high.load(std::memory_order_relaxed),
                                 g_context_salt_low.load(std::memory_order_relaxed)};
  if (scope.set) [[likely]] {
    slot = scope;
  } else if (writer.open_thread_spans != 0 && t_context.current == nullptr && implicit_thread_context(slot)) {
    // Inside a thread's outermost span: its trace, as the reader derives from the span around it.
  } else {
    format::derived_task_trace_id(salt, task, slot.trace_high, slot.trace_low);
    slot.flags = kSampledTraceFlag;
    slot.tracestate = 0;
    slot.set = true;
  }
  slot.span = format::derived_task_span_id(salt, task);
  slot.owner = task;
  slot.owner_generation = writer.generation;
  if (!scope.set && parent != 0) [[unlikely]]
    emit_task_context(writer, task, slot);
}

void emit_task_resolve(ThreadWriter& writer, uint64_t task, uint64_t resolver, format::TaskOutcome outcome,
                       const char* text, size_t length);
void emit_task_label(ThreadWriter& writer, uint64_t task, const char* text, size_t length);

}  // namespace chronicle::detail
