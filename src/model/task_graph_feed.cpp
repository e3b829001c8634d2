#include "model/task_graph_feed.hpp"

#include <algorithm>
#include <utility>

namespace chronicle::model {
namespace {

// A batch is large enough that the lock is taken rarely, and few wait, so that what is handed
// over stays a few megabytes whatever the trace's size.
constexpr size_t kBatchEvents = 4096;
constexpr size_t kMaxBatchesWaiting = 8;

}  // namespace

TaskGraphFeed::TaskGraphFeed(TaskGraphBuilder::SiteNames site_names, GraphDetail detail)
    : site_names_(std::move(site_names)), detail_(detail) {
  filling_.reserve(kBatchEvents);
}

// What TaskGraphBuilder::add does with an event, as far as the graph it finishes goes: task and
// loop events change it; spans, instants, notes and counters only while a task runs on the
// thread (they are its notes, and a span's end is also its task's); of any other event only the
// time counts (first_ticks, last_ticks), which the feed keeps itself: in a time-ordered pass
// nearly every event is a new last one. The pairing's runs of a thread hold at least the
// builder's (both begin a run at task_run_begin; at a task_run_end the pairing ends that run, the
// builder that run and any left open inside it), so no event the builder would note is held back.
bool TaskGraphFeed::changes_graph(const reader::Event& event, const reader::SpanPairing& pairing) {
  using format::EventId;
  switch (event.type) {
    case EventId::task_create:
    case EventId::task_run_begin:
    case EventId::task_run_end:
    case EventId::task_wait:
    case EventId::task_resolve:
    case EventId::task_label:
    case EventId::loop_suspend:
    case EventId::loop_resume:
      return true;
    case EventId::span_begin:
    case EventId::span_end:
    case EventId::instant:
    case EventId::note:
    case EventId::counter:
    case EventId::counter_float:
      return pairing.running_task(event.thread_id) != 0;
    default:
      return false;
  }
}

void TaskGraphFeed::add_times(uint64_t first_ticks, uint64_t last_ticks) {
  first_ticks_ = std::min(first_ticks_, first_ticks);
  last_ticks_ = std::max(last_ticks_, last_ticks);
}

void TaskGraphFeed::add(const reader::Event& event, const reader::SpanPairing& pairing) {
  first_ticks_ = std::min(first_ticks_, event.ticks);
  last_ticks_ = std::max(last_ticks_, event.ticks);
  if (!changes_graph(event, pairing)) return;
  ++handed_over_;
  Handed& handed = filling_.emplace_back();
  handed.event = event;
  handed.event.span = nullptr;
  // The builder reads a span only at its end; the pairing's pointer lasts until its next event.
  if (event.span && event.type == format::EventId::span_end) {
    handed.span_task = event.span->task;
    handed.span_site = event.span->site_id;
    handed.has_span = true;
  }
  handed.text.assign(event.text);
  if (filling_.size() >= kBatchEvents) hand_over();
}

void TaskGraphFeed::hand_over() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return waiting_.size() < kMaxBatchesWaiting || abandoned_; });
  if (abandoned_) {
    filling_.clear();
    return;
  }
  waiting_.push_back(std::move(filling_));
  if (!spare_.empty()) {
    filling_ = std::move(spare_.back());
    spare_.pop_back();
  } else {
    filling_ = Batch();
    filling_.reserve(kBatchEvents);
  }
  changed_.notify_all();
}

void TaskGraphFeed::close() {
  if (!filling_.empty()) hand_over();
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

bool TaskGraphFeed::take(Batch& batch) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !waiting_.empty() || closed_; });
  if (waiting_.empty()) return false;
  batch = std::move(waiting_.front());
  waiting_.pop_front();
  changed_.notify_all();
  return true;
}

TaskGraph TaskGraphFeed::build(const std::function<bool()>& other_work) {
  TaskGraphBuilder builder(site_names_, detail_);
  builder.reserve(expected_tasks_, expected_edges_);
  bool other_work_left = true;
  try {
    Batch batch;
    reader::PairedSpan span;  // a handed span_end's, as far as the builder reads it
    while (true) {
      if (other_work_left) {
        bool nothing_waits = false;
        {
          std::lock_guard lock(mutex_);
          nothing_waits = waiting_.empty() && !closed_;
        }
        if (nothing_waits) {
          other_work_left = other_work();
          continue;
        }
      }
      if (!take(batch)) break;
      for (Handed& handed : batch) {
        span.task = handed.span_task;
        span.site_id = handed.span_site;
        handed.event.span = handed.has_span ? &span : nullptr;
        handed.event.text = handed.text;
        builder.add(handed.event);
      }
      batch.clear();
      std::lock_guard lock(mutex_);
      spare_.push_back(std::move(batch));
      batch = Batch();
    }
    while (other_work_left) other_work_left = other_work();
    // take() saw closed_ under the lock, after the pass's last add(). With no events the two
    // times are (max, 0), which change nothing.
    builder.add_times(first_ticks_, last_ticks_);
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      abandoned_ = true;
    }
    changed_.notify_all();
    throw;
  }
  return builder.finish();
}

}  // namespace chronicle::model
