#include "reader/span_pairing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "reader/trace_reader.hpp"

namespace chronicle::reader {

namespace {

bool holds_context_events(const Trace& trace) {
  using format::EventId;
  uint32_t context_events = 0;
  for (const EventId id : {EventId::context_send, EventId::context_receive, EventId::context_receive_end,
                           EventId::context_tracestate, EventId::span_context, EventId::task_context})
    context_events |= format::event_type_bit(static_cast<uint32_t>(id));
  for (size_t stream = 0; stream < trace.streams().size(); ++stream)
    if ((trace.event_types(stream) & context_events) != 0) return true;
  return false;
}

}  // namespace

SpanPairing::SpanPairing(const Trace& trace, Identities identities)
    : trace_(&trace), identities_(identities == Identities::worked_out || holds_context_events(trace)) {
  const auto& uuid = trace.description().uuid;
  salt_high_ = format::load_big_endian_u64(uuid.data());
  salt_low_ = format::load_big_endian_u64(uuid.data() + 8);
  learn_sites();
}

void SpanPairing::reread(const Trace& trace) {
  trace_ = &trace;
  learn_sites();
}

// Sites only ever gain ids above the ones they had: the first of each name keeps its id.
void SpanPairing::learn_sites() {
  std::map<std::pair<std::string_view, std::string_view>, uint32_t> first_of_name;
  for (const Site& site : trace_->sites()) {
    if (site.id == 0) continue;
    if (name_key_.size() <= site.id) name_key_.resize(site.id + 1, 0);
    name_key_[site.id] = first_of_name.try_emplace({site.category, site.name}, site.id).first->second;
  }
}

uint32_t SpanPairing::name_key(uint32_t site_id) const {
  // A site the definitions do not have (a damaged trace) is a name of its own.
  return site_id < name_key_.size() && name_key_[site_id] != 0 ? name_key_[site_id] : site_id;
}

uint64_t SpanPairing::running_task(uint32_t thread_id) const {
  const std::vector<uint64_t>* runs = running_.find(thread_id);
  return !runs || runs->empty() ? 0 : runs->back();
}

std::vector<PairedSpan>& SpanPairing::owner_stack(uint32_t thread_id, uint64_t task) {
  return task != 0 ? task_open_[task] : thread_open_[thread_id];
}

uint32_t SpanPairing::depth_on(uint32_t thread_id) const {
  const uint64_t task = running_task(thread_id);
  if (task != 0) {
    const auto found = task_open_.find(task);
    return found == task_open_.end() ? 0 : static_cast<uint32_t>(found->second.size());
  }
  const std::vector<PairedSpan>* stack = thread_open_.find(thread_id);
  return stack ? static_cast<uint32_t>(stack->size()) : 0;
}

const PairedSpan* SpanPairing::innermost_on(uint32_t thread_id) const {
  const uint64_t task = running_task(thread_id);
  const std::vector<PairedSpan>* stack = task != 0 ? open_in_task(task) : thread_open_.find(thread_id);
  return stack && !stack->empty() ? &stack->back() : nullptr;
}

const std::vector<PairedSpan>* SpanPairing::open_in_task(uint64_t task) const {
  const auto found = task_open_.find(task);
  return found == task_open_.end() || found->second.empty() ? nullptr : &found->second;
}

const PairedSpan* SpanPairing::follow(const Event& event) {
  switch (event.type) {
    case format::EventId::span_begin:
      return begin(event);
    case format::EventId::span_context: {
      pending_identity_[event.thread_id] = event;
      return nullptr;
    }
    case format::EventId::span_end:
      return end(event);
    case format::EventId::task_run_begin:
      if (event.task != 0) running_[event.thread_id].push_back(event.task);
      return nullptr;
    case format::EventId::task_create: {
      if (!identities_) return nullptr;
      // The trace of what it was created inside: the innermost span or receive open where it was
      // created, else its parent task's, else its own; a task_context right after says otherwise.
      // Its creator is its parent, the task current where it was made, which need not be running
      // (a chronicle::task in its awaiter's await_suspend, a CurrentTaskScope); else the thread's.
      const TaskOrigin* parent = event.related_task != 0 ? origin_of(event.related_task) : nullptr;
      const uint64_t creator = event.related_task != 0 ? event.related_task : running_task(event.thread_id);
      if (const PairedSpan* around = innermost_context(event.thread_id, creator)) {
        TaskOrigin& origin = origin_for(event.task);
        origin.trace = origin.creator_trace = {around->trace_high, around->trace_low};
        origin.creator_span = around->span_id;
        origin.has_creator = true;
      } else {
        const auto trace = parent ? parent->trace : task_trace(event.task);
        const auto creator_trace = task_trace(creator);
        TaskOrigin& origin = origin_for(event.task);  // after the lookups: it may move the origins
        if (creator != 0) {
          origin.creator_trace = creator_trace;
          origin.creator_span = task_span_id(creator);
          origin.has_creator = true;
        }
        origin.trace = trace;
      }
      return nullptr;
    }
    case format::EventId::task_context:
      origin_for(event.task).trace = {event.trace_high, event.trace_low};
      return nullptr;
    case format::EventId::context_send:
      return send(event);
    case format::EventId::instant:
      last_instant_[event.thread_id] = {name_key(event.name_id), event.ticks};
      return nullptr;
    case format::EventId::attribute_int:
    case format::EventId::attribute_uint:
    case format::EventId::attribute_float:
    case format::EventId::attribute_bool:
    case format::EventId::attribute_string:
    case format::EventId::span_status:
      return attribute(event);
    case format::EventId::context_receive:
      return receive_begin(event);
    case format::EventId::context_receive_end:
      return receive_end(event);
    case format::EventId::task_run_end: {
      // The innermost run of that task: runs of one thread nest (a task that sync_waits runs
      // the awaited task inside its own run).
      auto& runs = running_[event.thread_id];
      const auto found = std::find(runs.rbegin(), runs.rend(), event.task);
      if (found != runs.rend()) runs.erase(std::next(found).base());
      return nullptr;
    }
    default:
      return nullptr;
  }
}

const PairedSpan* SpanPairing::begin(const Event& event) {
  const uint64_t task = running_task(event.thread_id);
  auto& stack = owner_stack(event.thread_id, task);
  PairedSpan span;
  span.sequence = next_sequence_++;
  span.parent_sequence = stack.empty() ? 0 : stack.back().sequence;
  span.site_id = event.name_id;
  span.task = task;
  span.thread_id = event.thread_id;
  span.depth = static_cast<uint32_t>(stack.size());
  span.begin = event.ticks;
  span.end = event.ticks;
  if (identities_) set_context(span, event.thread_id, task);
  if (std::optional<Event>* identity = pending_identity_.find(event.thread_id); identity && *identity) {
    take_identity(span, **identity, task);
    identity->reset();
  }
  stack.push_back(std::move(span));
  return &stack.back();
}

void SpanPairing::take_identity(PairedSpan& span, const Event& identity, uint64_t task) {
  span.trace_high = identity.trace_high;
  span.trace_low = identity.trace_low;
  span.parent_span_id = identity.context_parent;
  span.kind = identity.span_kind;
  if (identity.context_span == 0) return;
  span.span_id = identity.context_span;
  auto& receives = task != 0 ? task_receives_[task] : thread_receives_[span.thread_id];
  if (!receives.empty() && receives.back().span_id == span.span_id) receives.back().named_by_span = true;
}

std::pair<uint64_t, uint64_t> SpanPairing::task_trace(uint64_t task) const {
  if (const TaskOrigin* origin = origin_of(task)) return origin->trace;
  std::pair<uint64_t, uint64_t> trace;
  format::derived_task_trace_id({salt_high_, salt_low_}, task, trace.first, trace.second);
  return trace;
}

uint64_t SpanPairing::task_span_id(uint64_t task) const {
  return format::derived_task_span_id({salt_high_, salt_low_}, task);
}

uint64_t SpanPairing::task_parent_span(uint64_t task) const {
  const TaskOrigin* origin = origin_of(task);
  return origin && origin->has_creator && origin->creator_trace == origin->trace ? origin->creator_span : 0;
}

const SpanPairing::TaskOrigin* SpanPairing::origin_of(uint64_t task) const {
  const size_t place = origin_places_.find(task);
  return place == TaskIdIndex::kNone ? nullptr : &origins_[place];
}

SpanPairing::TaskOrigin& SpanPairing::origin_for(uint64_t task) {
  const auto [place, added] = origin_places_.try_add(task, origins_.size());
  if (added) origins_.emplace_back();
  return origins_[place];
}

// The innermost span or receive open in the owner: the one that began last.
const PairedSpan* SpanPairing::innermost_context(uint32_t thread_id, uint64_t task) const {
  const PairedSpan* innermost = nullptr;
  auto consider = [&](const std::vector<PairedSpan>* stack) {
    if (!stack || stack->empty()) return;
    if (!innermost || stack->back().sequence > innermost->sequence) innermost = &stack->back();
  };
  auto of_task = [task](const std::unordered_map<uint64_t, std::vector<PairedSpan>>& stacks) {
    const auto found = stacks.find(task);
    return found == stacks.end() ? nullptr : &found->second;
  };
  if (task != 0) {
    consider(of_task(task_open_));
    consider(of_task(task_receives_));
  } else {
    consider(thread_open_.find(thread_id));
    consider(thread_receives_.find(thread_id));
  }
  return innermost;
}

void SpanPairing::set_context(PairedSpan& span, uint32_t thread_id, uint64_t task) const {
  // A span's id: a bijective mix of its sequence (top bit set, apart from tasks' ids) with the salt.
  span.span_id = format::mix_id(span.sequence | (uint64_t{1} << 63), salt_high_);
  if (const PairedSpan* around = innermost_context(thread_id, task)) {
    span.trace_high = around->trace_high;
    span.trace_low = around->trace_low;
    span.parent_span_id = around->span_id;
  } else if (task != 0) {
    std::tie(span.trace_high, span.trace_low) = task_trace(task);
    span.parent_span_id = task_span_id(task);
  } else {
    // A thread's outermost span, outside any task and context, is the root of a trace: the one
    // the writer gave the sends and tasks inside it (format::derived_root_trace_id).
    const format::ContextSalt salt{salt_high_, salt_low_};
    format::derived_root_trace_id(salt, thread_id, span.begin, span.trace_high, span.trace_low);
    span.span_id = format::derived_root_span_id(salt, thread_id, span.begin);
    span.parent_span_id = 0;
  }
}

const PairedSpan* SpanPairing::send(const Event& event) {
  const uint64_t task = running_task(event.thread_id);
  PairedSpan& span = current_;
  span = PairedSpan{};
  span.role = SpanRole::send;
  span.sequence = next_sequence_++;
  span.task = task;
  span.thread_id = span.end_thread_id = event.thread_id;
  span.begin = span.end = event.ticks;
  span.ended = true;
  span.trace_high = event.trace_high;
  span.trace_low = event.trace_low;
  span.span_id = event.context_span;
  if (const PairedSpan* around = innermost_on(event.thread_id);
      around && around->span_id == span.span_id && around->trace_low == span.trace_low)
    return nullptr;  // the send of the span around it, which stands for it
  // Its parent is what is around it, if the message went out in that trace.
  PairedSpan around;
  around.sequence = span.sequence;
  set_context(around, event.thread_id, task);
  if (around.trace_high == span.trace_high && around.trace_low == span.trace_low)
    span.parent_span_id = around.parent_span_id;
  return &current_;
}

const PairedSpan* SpanPairing::receive_begin(const Event& event) {
  const uint64_t task = running_task(event.thread_id);
  auto& stack = task != 0 ? task_receives_[task] : thread_receives_[event.thread_id];
  PairedSpan span;
  span.role = SpanRole::receive;
  span.sequence = next_sequence_++;
  span.task = task;
  span.thread_id = event.thread_id;
  span.begin = span.end = event.ticks;
  span.trace_high = event.trace_high;
  span.trace_low = event.trace_low;
  span.span_id = event.context_span;
  span.parent_span_id = event.context_parent;
  stack.push_back(span);
  return &stack.back();
}

const PairedSpan* SpanPairing::receive_end(const Event& event) {
  auto close = [&](std::vector<PairedSpan>& stack) {
    for (size_t i = stack.size(); i-- > 0;) {
      if (stack[i].span_id != event.context_span) continue;
      current_ = stack[i];
      stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
      current_.end = event.ticks;
      current_.end_thread_id = event.thread_id;
      current_.ended = true;
      return true;
    }
    return false;
  };
  const uint64_t task = running_task(event.thread_id);
  bool closed = false;
  if (task != 0) {
    if (auto found = task_receives_.find(task); found != task_receives_.end()) closed = close(found->second);
  }
  if (!closed)
    if (std::vector<PairedSpan>* stack = thread_receives_.find(event.thread_id); stack) closed = close(*stack);
  return closed && !current_.named_by_span ? &current_ : nullptr;
}

std::vector<PairedSpan> SpanPairing::close_all_receives(uint64_t last_ticks) {
  std::vector<PairedSpan> closed;
  auto close_stacks = [&](auto& stacks) {
    for (auto& [owner, stack] : stacks)
      for (PairedSpan& span : stack) {
        if (span.named_by_span) continue;
        span.end = std::max(span.begin, last_ticks);
        span.end_thread_id = span.thread_id;
        closed.push_back(span);
      }
    stacks.clear();
  };
  close_stacks(thread_receives_);
  close_stacks(task_receives_);
  std::sort(closed.begin(), closed.end(),
            [](const PairedSpan& a, const PairedSpan& b) { return a.sequence < b.sequence; });
  return closed;
}

// Closes the innermost span of `stack` named `key` into current_; false when there is none.
bool SpanPairing::close_in(std::vector<PairedSpan>& stack, uint32_t key, const Event& event) {
  for (size_t i = stack.size(); i-- > 0;) {
    if (name_key(stack[i].site_id) != key) continue;
    if (i + 1 != stack.size()) ++problems_.out_of_order_ends;
    current_ = std::move(stack[i]);
    stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
    current_.end = event.ticks;
    current_.end_thread_id = event.thread_id;
    current_.ended = true;
    return true;
  }
  return false;
}

// The open span an attribute or status belongs to: the innermost of its site's name in the
// owner the thread records into (else among the thread's own, as an end pairs), or the innermost
// of all for site 0. Null for an instant's (the instant just before it) and for none.
PairedSpan* SpanPairing::target_of(const Event& event) {
  const uint32_t key = event.span_site == 0 ? 0 : name_key(event.span_site);
  if (key != 0) {
    const LastInstant* instant = last_instant_.find(event.thread_id);
    if (instant && instant->key == key && instant->ticks == event.ticks) return nullptr;
  }
  auto find_in = [&](std::vector<PairedSpan>* stack) -> PairedSpan* {
    if (!stack) return nullptr;
    for (size_t i = stack->size(); i-- > 0;)
      if (key == 0 || name_key((*stack)[i].site_id) == key) return &(*stack)[i];
    return nullptr;
  };
  const uint64_t task = running_task(event.thread_id);
  if (task != 0) {
    const auto found = task_open_.find(task);
    if (PairedSpan* span = find_in(found == task_open_.end() ? nullptr : &found->second)) return span;
    if (key == 0) return nullptr;  // the task's innermost: none open in it
  }
  return find_in(thread_open_.find(event.thread_id));
}

const PairedSpan* SpanPairing::attribute(const Event& event) {
  PairedSpan* span = target_of(event);
  if (!span) {
    // The innermost of whatever is open, in a task that holds none: the task's own.
    const uint64_t task = event.span_site == 0 ? running_task(event.thread_id) : 0;
    if (task != 0 && event.type != format::EventId::span_status) {
      task_attributes_[task].push_back(attribute_of(*trace_, event));
      return nullptr;
    }
    const Site* site = event.span_site ? trace_->site(event.span_site) : nullptr;
    if (!site || site->kind != format::SiteKind::instant) ++problems_.orphan_attributes;
    return nullptr;
  }
  if (event.type == format::EventId::span_status) {
    span->failed = event.status == format::SpanStatus::error;
    span->status_message = event.text;
  } else {
    span->attributes.push_back(attribute_of(*trace_, event));
  }
  return span;
}

const std::vector<SpanAttribute>* SpanPairing::task_attributes(uint64_t task) const {
  const auto found = task_attributes_.find(task);
  return found == task_attributes_.end() ? nullptr : &found->second;
}

SpanAttribute attribute_of(const Trace& trace, const Event& event) {
  SpanAttribute attribute;
  const Site* key = trace.site(event.name_id);
  attribute.key = key ? key->name : fmt::format("#{}", event.name_id);
  switch (event.type) {
    case format::EventId::attribute_uint:
      attribute.type = SpanAttribute::Type::uint64;
      attribute.uint_value = event.value_uint;
      break;
    case format::EventId::attribute_float:
      attribute.type = SpanAttribute::Type::float64;
      attribute.float_value = event.value_float;
      break;
    case format::EventId::attribute_bool:
      attribute.type = SpanAttribute::Type::boolean;
      attribute.int_value = event.value != 0;
      break;
    case format::EventId::attribute_string:
      attribute.type = SpanAttribute::Type::string;
      attribute.text = event.text;
      break;
    default:
      attribute.type = SpanAttribute::Type::int64;
      attribute.int_value = event.value;
      break;
  }
  return attribute;
}

std::string attribute_text(const SpanAttribute& attribute) {
  switch (attribute.type) {
    case SpanAttribute::Type::uint64:
      return std::to_string(attribute.uint_value);
    case SpanAttribute::Type::float64:
      return fmt::format("{}", attribute.float_value);
    case SpanAttribute::Type::boolean:
      return attribute.int_value ? "true" : "false";
    case SpanAttribute::Type::string:
      return attribute.text;
    case SpanAttribute::Type::int64:
      break;
  }
  return std::to_string(attribute.int_value);
}

const PairedSpan* SpanPairing::end(const Event& event) {
  const uint32_t key = name_key(event.name_id);
  const uint64_t task = running_task(event.thread_id);
  if (task != 0) {
    const auto found = task_open_.find(task);
    if (found != task_open_.end() && close_in(found->second, key, event)) {
      if (found->second.empty()) task_open_.erase(found);
      return &current_;
    }
  }
  // Outside any task run, or a span the thread began before the run it ends in.
  if (std::vector<PairedSpan>* stack = thread_open_.find(event.thread_id); stack && close_in(*stack, key, event))
    return &current_;
  if (problems_.unmatched_ends++ == 0) {
    problems_.first_unmatched_site = event.name_id;
    problems_.first_unmatched_ticks = event.ticks;
    problems_.first_unmatched_thread = event.thread_id;
  }
  return nullptr;
}

std::vector<PairedSpan> SpanPairing::close_all(uint64_t last_ticks) {
  std::vector<PairedSpan> closed;
  auto close_stack = [&](std::vector<PairedSpan>& stack) {
    for (; !stack.empty(); stack.pop_back()) {
      PairedSpan span = stack.back();
      span.end = std::max(span.begin, last_ticks);
      span.end_thread_id = span.thread_id;
      span.ended = false;
      closed.push_back(span);
    }
  };
  for (auto& [thread_id, stack] : thread_open_) close_stack(stack);
  for (auto& [task, stack] : task_open_) close_stack(stack);
  thread_open_.clear();
  task_open_.clear();
  problems_.unclosed += closed.size();
  // Deterministic for the callers, whatever the hash maps' order.
  std::sort(closed.begin(), closed.end(), [](const PairedSpan& a, const PairedSpan& b) {
    return a.depth != b.depth ? a.depth > b.depth : a.sequence < b.sequence;
  });
  return closed;
}

std::vector<std::string> SpanPairing::describe_problems() const {
  return describe_pairing_problems(*trace_, problems_);
}

std::vector<std::string> describe_pairing_problems(const Trace& trace, const PairingProblems& problems) {
  std::vector<std::string> lines;
  if (problems.unmatched_ends > 0) {
    const Site* site = trace.site(problems.first_unmatched_site);
    lines.push_back(
        fmt::format("{} span end(s) matched no open span of their name in their task or thread, and close nothing "
                    "(the first: \"{}\" on thread {} at {})",
                    problems.unmatched_ends,
                    site ? site->category + "/" + site->name : fmt::format("#{}", problems.first_unmatched_site),
                    problems.first_unmatched_thread, trace.format_time(problems.first_unmatched_ticks)));
  }
  if (problems.orphan_attributes > 0)
    lines.push_back(fmt::format("{} attribute(s) or status(es) found no open span of theirs and belong to nothing",
                                problems.orphan_attributes));
  if (problems.out_of_order_ends > 0)
    lines.push_back(
        fmt::format("{} span end(s) closed a span that was not the innermost open one (BEGIN/END pairs "
                    "that cross)",
                    problems.out_of_order_ends));
  return lines;
}

}  // namespace chronicle::reader
