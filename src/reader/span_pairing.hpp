// Pairs span begins and ends, once, for every tool (Trace::for_each_event runs it).
//
// A span belongs to its owner: the task running on the thread when it began (the innermost run,
// as task_run_begin/task_run_end events tell), or else the thread itself. An end is paired in its
// own owner, with the innermost open span of the same category and name, wherever that owner now
// runs: a span at the top of a coroutine that resumes on another thread ends there, and closes
// that coroutine's span, never one of the thread's. An end that finds no such span in its owner
// (nor, inside a task run, among the thread's own spans) pairs with nothing and is counted.
//
// It also gives every span its trace context (chronicle/context.hpp), the one rule every export
// uses. A task's trace: the one recorded for it (task_context), else that of the innermost span or
// receive open where it was created (its parent then), else its parent task's, else one derived
// from its id; its span id derives from its id (format::derived_task_span_id). A span's parent is
// the innermost span or receive open in its owner, else its task's span; a span with neither
// starts a trace of its own. A receive (context_receive ... context_receive_end) is a span of the
// sender's trace whose parent is the sender's span; a send (context_send) is an instant span,
// a child of the innermost span, receive or task around it when that is in the trace it sent
// (else the root of the new trace it started).
//
// A span_context event names the next span_begin of its thread outright (another service's span,
// merged from OTLP): its trace, id, parent and kind replace the derived ones. A span so named with
// the id of the receive open around it is that receive, named: the receive ends as no span of its
// own. A send inside a span of its own id is that span's (a CLIENT span): no instant span of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chronicle/detail/layout.hpp"
#include "reader/task_id_index.hpp"

namespace chronicle::reader {

struct Event;
class Trace;

enum class SpanRole : uint8_t { span, send, receive };

// A typed attribute of a span or instant (CHRONICLE_SPAN_ARGS and the rest), as the trace has it.
struct SpanAttribute {
  enum class Type : uint8_t { int64, uint64, float64, boolean, string };
  std::string key;
  Type type = Type::int64;
  int64_t int_value = 0;  // int64; boolean: 0 or 1
  uint64_t uint_value = 0;
  double float_value = 0;
  std::string text;  // string
};
// The attribute an attribute_* event carries, its key named from the trace's sites.
SpanAttribute attribute_of(const Trace& trace, const Event& event);
// Its value as text: a string as it is, numbers as C++ prints them, booleans true/false.
std::string attribute_text(const SpanAttribute& attribute);
inline bool is_attribute_event(uint32_t type) {
  return type >= static_cast<uint32_t>(format::EventId::attribute_int) &&
         type <= static_cast<uint32_t>(format::EventId::attribute_string);
}
// Event types that tie threads together, so that their events must be read in one time order:
// tasks and loops (the pairing's runs and the task graph), and task contexts.
inline bool ties_threads(uint32_t type) {
  return (type >= static_cast<uint32_t>(format::EventId::task_create) &&
          type <= static_cast<uint32_t>(format::EventId::loop_resume)) ||
         type == static_cast<uint32_t>(format::EventId::task_context);
}

struct PairedSpan {
  SpanRole role = SpanRole::span;
  uint64_t sequence = 0;         // 1, 2, ... in the order the spans began
  uint64_t parent_sequence = 0;  // the span of the same owner around it; 0 at the top
  uint32_t site_id = 0;          // the begin's site
  uint64_t task = 0;             // its owner: a task; 0: the thread it began on
  uint32_t thread_id = 0;        // where it began
  uint32_t end_thread_id = 0;    // where it ended: another thread when its task moved
  uint32_t depth = 0;            // spans of the same owner open around it
  uint64_t begin = 0;            // ticks
  uint64_t end = 0;              // ticks; the trace's last event when it never ended
  bool ended = false;
  // Its trace context: W3C trace id (two big-endian halves), span id, parent span id (0: a root;
  // for a receive, the sender's span, which is in another process's trace).
  uint64_t trace_high = 0;
  uint64_t trace_low = 0;
  uint64_t span_id = 0;
  uint64_t parent_span_id = 0;
  // What its attribute and status events said while it was open (the last status wins).
  std::vector<SpanAttribute> attributes;
  bool failed = false;
  std::string status_message;
  uint8_t kind = 0;            // OTLP's SpanKind a span_context gave it; 0: its role's
  bool named_by_span = false;  // a receive a span of its own id names (the span stands for it)
};

struct PairingProblems {
  uint64_t unmatched_ends = 0;     // ends that found no open span of their name: paired with nothing
  uint64_t out_of_order_ends = 0;  // ends that closed a span other than their owner's innermost
  uint64_t unclosed = 0;           // spans still open at the end of the trace (close_all)
  uint32_t first_unmatched_site = 0;
  uint64_t first_unmatched_ticks = 0;
  uint32_t first_unmatched_thread = 0;
  uint64_t orphan_attributes = 0;  // attributes and statuses that found no open span of theirs
};

// Per-thread state by thread id, the last thread asked for remembered: the merged events come in
// runs of one thread, and pairing asks several questions of each event's thread. An
// unordered_map's elements keep their address when it grows, so the remembered one stays valid
// until clear(). Const lookups remember too: one thread at a time, as a pairing is used.
template <class T>
class ByThread {
 public:
  T& operator[](uint32_t thread) {
    if (last_ && last_thread_ == thread) return *last_;
    return *remember(thread, &map_[thread]);
  }
  T* find(uint32_t thread) { return lookup(thread); }
  const T* find(uint32_t thread) const { return lookup(thread); }
  auto begin() { return map_.begin(); }
  auto end() { return map_.end(); }
  void clear() {
    map_.clear();
    last_ = nullptr;
  }

 private:
  T* lookup(uint32_t thread) const {
    if (last_ && last_thread_ == thread) return last_;
    const auto found = map_.find(thread);
    return found == map_.end() ? nullptr : remember(thread, &found->second);
  }
  T* remember(uint32_t thread, T* state) const {
    last_thread_ = thread;
    return last_ = state;
  }
  mutable std::unordered_map<uint32_t, T> map_;
  mutable uint32_t last_thread_ = 0;
  mutable T* last_ = nullptr;
};

// describe_problems() of a pairing that found `problems` in `trace` (for readers that pair the
// threads' spans apart and add their problems up).
std::vector<std::string> describe_pairing_problems(const Trace& trace, const PairingProblems& problems);

class SpanPairing {
 public:
  // Whether each span's trace context (trace id, span id, parent span id) and each task's origin
  // are worked out: OTLP, the exports and the critical path's traces need them. A tool that reads
  // none (the viewer) may have them left out where the trace holds no context event (send,
  // receive, span or task context): then nothing else the pairing does depends on them, and each
  // span begins in some 120 fewer instructions. Their fields are then 0.
  enum class Identities { worked_out, left_out_unless_traced };
  explicit SpanPairing(const Trace& trace, Identities identities = Identities::worked_out);

  // Carries on with `trace`: the same trace read again further on (a trace still being written,
  // read in rounds). The sites it has gained are paired by name too; what is open stays open.
  void reread(const Trace& trace);

  // Follows one event of the time-ordered merge. Returns the span a span_begin opens (its end not
  // yet known) or a span_end closes; nullptr for other events and for an end that pairs with
  // nothing. The pointer is valid until the next call.
  const PairedSpan* follow(const Event& event);

  // A task's trace (high, low) and span id; for a task the trace never created, derived ones.
  std::pair<uint64_t, uint64_t> task_trace(uint64_t task) const;
  uint64_t task_span_id(uint64_t task) const;
  // The span a task was created inside (the innermost span or receive of its creator, else the
  // creator task's span) when that is in the task's trace; 0 otherwise (a root of its trace).
  uint64_t task_parent_span(uint64_t task) const;

  // Receives still open at the end of the trace, ended there (ended = false).
  std::vector<PairedSpan> close_all_receives(uint64_t last_ticks);

  // Spans open in the owner that `thread_id` records into now (its innermost task run, or itself).
  uint32_t depth_on(uint32_t thread_id) const;
  // The innermost span open in that owner; nullptr when none.
  const PairedSpan* innermost_on(uint32_t thread_id) const;
  // The task running innermost on `thread_id`; 0 when none.
  uint64_t running_task(uint32_t thread_id) const;
  // The spans `task` holds open, outermost first (nullptr when none): what continues when it
  // runs again.
  const std::vector<PairedSpan>* open_in_task(uint64_t task) const;
  // The attributes set in `task` while it held no span open (CHRONICLE_SPAN_ATTRIBUTE in a
  // coroutine): the task's own, in order (nullptr when none).
  const std::vector<SpanAttribute>* task_attributes(uint64_t task) const;
  const std::unordered_map<uint64_t, std::vector<SpanAttribute>>& all_task_attributes() const {
    return task_attributes_;
  }

  // Ends what is still open at `last_ticks` (ended = false), innermost first per owner, and
  // counts them as unclosed.
  std::vector<PairedSpan> close_all(uint64_t last_ticks);

  const PairingProblems& problems() const { return problems_; }
  // One line per kind of problem, for `stats` and the viewer's warnings; empty when none.
  std::vector<std::string> describe_problems() const;

  // What an end pairs by: the first site id of the site's category and name (a site the
  // definitions do not have is a name of its own). Const: threads may share one pairing for it.
  uint32_t name_key(uint32_t site_id) const;

 private:
  std::vector<PairedSpan>& owner_stack(uint32_t thread_id, uint64_t task);
  const PairedSpan* begin(const Event& event);
  const PairedSpan* end(const Event& event);
  bool close_in(std::vector<PairedSpan>& stack, uint32_t key, const Event& event);
  void set_context(PairedSpan& span, uint32_t thread_id, uint64_t task) const;
  const PairedSpan* innermost_context(uint32_t thread_id, uint64_t task) const;
  const PairedSpan* receive_begin(const Event& event);
  const PairedSpan* receive_end(const Event& event);
  const PairedSpan* send(const Event& event);
  const PairedSpan* attribute(const Event& event);
  PairedSpan* target_of(const Event& event);
  void take_identity(PairedSpan& span, const Event& identity, uint64_t task);

  void learn_sites();

  const Trace* trace_;
  std::vector<uint32_t> name_key_;           // by site id: the first site id of the same category and name
  ByThread<std::vector<uint64_t>> running_;  // task runs, innermost last
  ByThread<std::vector<PairedSpan>> thread_open_;
  struct LastInstant {
    uint32_t key = 0;
    uint64_t ticks = 0;
  };
  ByThread<LastInstant> last_instant_;               // an instant's attributes follow it at its time
  ByThread<std::optional<Event>> pending_identity_;  // a span_context the thread's next span_begin takes
  std::unordered_map<uint64_t, std::vector<PairedSpan>> task_open_;
  std::unordered_map<uint64_t, std::vector<SpanAttribute>> task_attributes_;
  ByThread<std::vector<PairedSpan>> thread_receives_;
  std::unordered_map<uint64_t, std::vector<PairedSpan>> task_receives_;
  // By task, where it began (the pairing meets a task event of its for nearly every task event of a
  // trace: flat arrays, where hash maps were a tenth of the viewer's merge of the tying events).
  struct TaskOrigin {
    std::pair<uint64_t, uint64_t> trace;          // its trace, as created or told (task_context)
    std::pair<uint64_t, uint64_t> creator_trace;  // what was around its creation, if anything
    uint64_t creator_span = 0;
    bool has_creator = false;
  };
  const TaskOrigin* origin_of(uint64_t task) const;
  TaskOrigin& origin_for(uint64_t task);  // made (with no trace yet) when new
  TaskIdIndex origin_places_;
  std::vector<TaskOrigin> origins_;
  bool identities_ = true;
  uint64_t salt_high_ = 0;
  uint64_t salt_low_ = 0;
  PairedSpan current_;
  uint64_t next_sequence_ = 1;
  PairingProblems problems_;
};

}  // namespace chronicle::reader
