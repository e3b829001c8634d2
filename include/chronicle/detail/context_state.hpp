// The trace context in scope on a thread (chronicle/context.hpp): where it lives and how tasks
// carry it. Header-only for the task types that install it at every run; the rest is in
// src/recorder/context_scope.cpp.
//
// A context lives in a slot. The thread has its own slot; a coroutine (chronicle::task) and an
// Asio handler have one each, filled when they are created and made the thread's current slot
// for each of their runs, so work continues its creator's trace on whatever thread it resumes.
// A ReceiveScope writes the slot current where it opens and restores it where it closes (the
// same slot, even when a coroutine resumed on another thread in between).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "chronicle/detail/layout.hpp"

namespace chronicle::detail {

// The sampled bit of W3C trace-flags, as TraceContext::kSampledFlag (checked where both are seen).
inline constexpr uint8_t kSampledTraceFlag = 0x01;

struct ContextSlot {
  uint64_t trace_high = 0;
  uint64_t trace_low = 0;
  uint64_t span = 0;  // the span work in scope is a child of: a task's, a receive's
  uint8_t flags = 0;
  bool set = false;
  // The task whose own context this is, in session `owner_generation` (0: none, or changed since,
  // by a ReceiveScope). A child created by that task in that session gets its trace from its
  // parent's in the reader, so nothing needs recording for it.
  uint64_t owner = 0;
  uint32_t owner_generation = 0;
  uint32_t tracestate = 0;  // a received tracestate carried on (intern_tracestate); 0: none
};

struct ContextThreadState {
  ContextSlot* current;  // null: the thread's own slot
  ContextSlot own;
};
extern thread_local constinit ContextThreadState t_context __attribute__((tls_model("initial-exec")));

// The running session's uuid as the salt of derived ids (set before the session is published).
extern std::atomic<uint64_t> g_context_salt_high;
extern std::atomic<uint64_t> g_context_salt_low;

inline ContextSlot& current_context_slot() {
  return t_context.current ? *t_context.current : t_context.own;
}

// Makes `slot` the thread's current one and returns the one it replaces.
inline ContextSlot* exchange_context_slot(ContextSlot* slot) {
  ContextSlot* previous = t_context.current;
  t_context.current = slot;
  return previous;
}

// What work outside any task and context continues: the trace of the thread's outermost open
// span, if one was begun outside any task (format::derived_root_trace_id; nothing is recorded for
// it). False when there is none: then a send starts a trace of its own.
bool implicit_thread_context(ContextSlot& out);

// A received tracestate as a small number a slot can carry (0 for an empty one, or when it cannot
// be kept: see the definition), and back.
uint32_t intern_tracestate(std::string_view tracestate);
std::string_view interned_tracestate(uint32_t index);

// Whether the reader derives the trace of a task created now under `parent` in session
// `generation` without a task_context event: the context in scope is `parent`'s own, or none.
inline bool reader_derives_child_context(const ContextSlot& scope, uint64_t parent, uint32_t generation) {
  return !scope.set || (parent != 0 && scope.owner == parent && scope.owner_generation == generation);
}

// Fills the slot of a task that carries its context (a coroutine, an Asio handler), made fresh
// (unset) with the task, while nothing is recorded: the context in scope only propagates. A
// recorded task's slot is filled by capture_created_task_context (task_writer.hpp).
inline void carry_context(ContextSlot& slot) {
  const ContextSlot& scope = current_context_slot();
  if (!scope.set) [[likely]]
    return;
  slot = scope;
  slot.owner = 0;
}

// Records the context in scope as task's trace (when reader_derives_child_context says it must).
void record_inherited_context(uint64_t task);

}  // namespace chronicle::detail
