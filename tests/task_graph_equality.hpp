// Two task graphs hold the same tasks, runs, notes, edges, idle intervals and problems: for a
// tool that builds the graph in a pass of its own (the viewer's index), against
// model::build_task_graph.
#pragma once

#include <gtest/gtest.h>

#include "model/task_graph.hpp"

namespace chronicle::test {

inline void expect_same_task(const model::Task& got, const model::Task& expected) {
  SCOPED_TRACE(model::task_id_text(expected.id));
  EXPECT_EQ(got.id, expected.id);
  EXPECT_EQ(got.kind, expected.kind);
  EXPECT_EQ(got.name, expected.name);
  EXPECT_EQ(got.label, expected.label);
  EXPECT_EQ(got.parent, expected.parent);
  EXPECT_EQ(got.created_on_thread, expected.created_on_thread);
  EXPECT_EQ(got.created, expected.created);
  EXPECT_EQ(got.resolved, expected.resolved);
  EXPECT_EQ(got.outcome, expected.outcome);
  EXPECT_EQ(got.outcome_text, expected.outcome_text);
  EXPECT_EQ(got.resolver, expected.resolver);
  EXPECT_EQ(got.seen_created, expected.seen_created);
  EXPECT_EQ(got.waits_on, expected.waits_on);
  ASSERT_EQ(got.runs.size(), expected.runs.size());
  for (size_t k = 0; k < got.runs.size(); ++k) {
    EXPECT_EQ(got.runs[k].thread_id, expected.runs[k].thread_id);
    EXPECT_EQ(got.runs[k].begin, expected.runs[k].begin);
    EXPECT_EQ(got.runs[k].end, expected.runs[k].end);
    EXPECT_EQ(got.runs[k].ended, expected.runs[k].ended);
  }
  ASSERT_EQ(got.notes.size(), expected.notes.size());
  for (size_t k = 0; k < got.notes.size(); ++k) {
    EXPECT_EQ(got.notes[k].ticks, expected.notes[k].ticks);
    EXPECT_EQ(got.notes[k].thread_id, expected.notes[k].thread_id);
    EXPECT_EQ(got.notes[k].type, expected.notes[k].type);
    EXPECT_EQ(got.notes[k].text, expected.notes[k].text);
  }
}

inline void expect_same_task_graph(const model::TaskGraph& got, const model::TaskGraph& expected) {
  ASSERT_EQ(got.tasks().size(), expected.tasks().size());
  for (size_t k = 0; k < got.tasks().size(); ++k) {
    expect_same_task(got.tasks()[k], expected.tasks()[k]);
    if (::testing::Test::HasFailure()) return;  // one task's differences are enough to read
  }
  ASSERT_EQ(got.edges().size(), expected.edges().size());
  for (size_t k = 0; k < got.edges().size(); ++k) {
    EXPECT_EQ(got.edges()[k].kind, expected.edges()[k].kind) << "edge " << k;
    EXPECT_EQ(got.edges()[k].from, expected.edges()[k].from) << "edge " << k;
    EXPECT_EQ(got.edges()[k].to, expected.edges()[k].to) << "edge " << k;
    EXPECT_EQ(got.edges()[k].ticks, expected.edges()[k].ticks) << "edge " << k;
  }
  ASSERT_EQ(got.idle().size(), expected.idle().size());
  for (size_t k = 0; k < got.idle().size(); ++k) {
    EXPECT_EQ(got.idle()[k].thread_id, expected.idle()[k].thread_id) << "idle " << k;
    EXPECT_EQ(got.idle()[k].begin, expected.idle()[k].begin) << "idle " << k;
    EXPECT_EQ(got.idle()[k].end, expected.idle()[k].end) << "idle " << k;
    EXPECT_EQ(got.idle()[k].ended, expected.idle()[k].ended) << "idle " << k;
    EXPECT_EQ(got.idle_ticks(got.idle()[k].thread_id), expected.idle_ticks(got.idle()[k].thread_id));
  }
  EXPECT_EQ(got.problems(), expected.problems());
  EXPECT_EQ(got.first_ticks(), expected.first_ticks());
  EXPECT_EQ(got.last_ticks(), expected.last_ticks());
}

}  // namespace chronicle::test
