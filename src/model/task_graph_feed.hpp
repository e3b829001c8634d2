// A task graph built on a thread of its own from a time-ordered pass that is there for something
// else too (the viewer's index pairs spans in it): the pass hands over, in batches, the few events
// the graph reads, and the building thread does other work while none wait. So one merge of the
// streams serves both, and the graph's work is off the pass's thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "model/task_graph.hpp"
#include "reader/span_pairing.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::model {

class TaskGraphFeed {
 public:
  TaskGraphFeed(TaskGraphBuilder::SiteNames site_names, GraphDetail detail);

  // The pass's side. Each event of reader::Trace::for_each_event, with the pairing it runs
  // (which has followed the event): only the events that can change the graph are handed over.
  void add(const reader::Event& event, const reader::SpanPairing& pairing);
  // Before build(): how many tasks the graph will hold, about (task_create events counted), and a
  // bound on its edges (task_create, task_wait and task_resolve events counted).
  void expect_tasks(size_t tasks, size_t edges) {
    expected_tasks_ = tasks;
    expected_edges_ = edges;
  }
  // Times of events the pass did not hand to add() (read apart from it), before close().
  void add_times(uint64_t first_ticks, uint64_t last_ticks);
  // No more events: after the pass, and also when it failed.
  void close();

  // The building side: the graph of every event handed over until close(). While no batch waits,
  // calls `other_work` until it returns false (nothing of it left), and does what it leaves after
  // close(). Should `other_work` throw, the pass's add() hands nothing over from then on.
  TaskGraph build(const std::function<bool()>& other_work);

  // Events handed over to the building side so far (the pass's side reads it).
  uint64_t handed_over() const { return handed_over_; }

 private:
  struct Handed {
    reader::Event event;  // its `span` and `text` are set again from these when it is taken
    // Of a span_end's span, what the builder reads (TaskGraphBuilder::add): its owner and site.
    uint64_t span_task = 0;
    uint32_t span_site = 0;
    bool has_span = false;
    // The event's text, copied: it points into the reader's bytes, which for a compressed trace
    // are a decoded unit freed once the reader moves on, before the building side takes it.
    std::string text;
  };
  using Batch = std::vector<Handed>;

  static bool changes_graph(const reader::Event& event, const reader::SpanPairing& pairing);
  void hand_over();
  bool take(Batch& batch);  // false when closed and nothing waits

  TaskGraphBuilder::SiteNames site_names_;
  GraphDetail detail_;
  uint64_t first_ticks_ = std::numeric_limits<uint64_t>::max();
  uint64_t last_ticks_ = 0;
  uint64_t handed_over_ = 0;
  size_t expected_tasks_ = 0;
  size_t expected_edges_ = 0;
  Batch filling_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> waiting_;
  std::vector<Batch> spare_;  // batches taken and emptied, to fill again without allocating
  bool closed_ = false;
  bool abandoned_ = false;
};

}  // namespace chronicle::model
