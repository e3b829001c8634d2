// The quote service example (examples/quote_service.cpp), recorded by `chronicle record` once for
// the suite: its task graph is exactly the service (every request's fan-out, failure, timeout and
// cancellation, with who resolved what), the critical path of a timed-out request names the
// timeout and the queueing with their states, the OTLP export has one trace per request with
// everything the request started under it, and the metrics count requests by outcome.
//
// 40 requests: request i times out when i % 10 == 3 and fails (the stock service is down) when
// i % 10 == 7, so 32 succeed, 4 time out and 4 fail. Every figure below follows from that and
// from the service's structure, none from timing.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "analysis/profile.hpp"
#include "format/catalogue.hpp"
#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"
#include "viewer/json_api.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle {
namespace {

using model::Task;
using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
constexpr int kRequests = 40;

class QuoteExample : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = std::make_unique<TemporaryDirectory>();
    const auto result =
        run(kCli + " record -q -o " + trace_path() + " -- " + QUOTE_EXAMPLE + " " + std::to_string(kRequests) + " 4");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    ASSERT_NE(result.out.find("40 requests: 32 ok, 4 unavailable, 4 timed out; 40 audit records"), std::string::npos)
        << result.out;
  }
  static void TearDownTestSuite() { directory_.reset(); }
  static std::string trace_path() { return *directory_ / "trace"; }

  static std::unique_ptr<TemporaryDirectory> directory_;
};
std::unique_ptr<TemporaryDirectory> QuoteExample::directory_;

std::string outcome_name(format::TaskOutcome outcome) {
  switch (outcome) {
    case format::TaskOutcome::ok:
      return "ok";
    case format::TaskOutcome::failed:
      return "failed";
    case format::TaskOutcome::cancelled:
      return "cancelled";
  }
  return "?";
}

// A task's name for these assertions: its function (or operation) name, labels aside.
std::string plain_name(const model::TaskGraph& graph, model::TaskId id) {
  const Task* task = graph.find(id);
  return task ? task->name : "-";
}

// "kind name: outcome "text" by resolver" -> how many tasks.
std::map<std::string, int> count_outcomes(const model::TaskGraph& graph) {
  std::map<std::string, int> counts;
  for (const Task& task : graph.tasks()) {
    std::string line = std::string(format::task_kind_name(task.kind)) + " " + task.name + ": ";
    if (!task.resolved) {
      ++counts[line + "unresolved"];
      continue;
    }
    line += outcome_name(task.outcome);
    if (!task.outcome_text.empty()) line += " \"" + task.outcome_text + "\"";
    if (task.resolver != 0 && task.resolver != task.id) line += " by " + plain_name(graph, task.resolver);
    ++counts[line];
  }
  return counts;
}

// "from kind to" -> how many edges.
std::map<std::string, int> count_edges(const model::TaskGraph& graph) {
  std::map<std::string, int> counts;
  for (const model::Edge& edge : graph.edges())
    ++counts[plain_name(graph, edge.from) + " " + std::string(model::edge_kind_name(edge.kind)) + " " +
             plain_name(graph, edge.to)];
  return counts;
}

TEST_F(QuoteExample, TheTaskGraphIsExactlyTheService) {
  reader::Trace trace(trace_path());
  ASSERT_EQ(trace.events_discarded(), 0u);
  const model::TaskGraph graph = model::build_task_graph(trace);
  for (const std::string& problem : graph.problems()) ADD_FAILURE() << problem;

  const std::map<std::string, int> expected_outcomes = {
      {"coroutine handle_request: ok", 40},
      {"coroutine quote: ok", 32},
      {"coroutine quote: failed \"timed out\"", 4},
      {"coroutine quote: failed \"stock service unavailable\"", 4},
      {"coroutine chronicle::when_all: ok", 32},
      {"coroutine chronicle::when_all: failed \"timed out\"", 4},
      {"coroutine chronicle::when_all: failed \"stock service unavailable\"", 4},
      {"coroutine load_user: ok", 40},
      {"coroutine check_stock: ok", 36},
      {"coroutine check_stock: failed \"stock service unavailable\"", 4},
      {"coroutine chronicle::with_timeout: ok", 32},
      {"coroutine chronicle::with_timeout: failed \"timed out\"", 4},
      // A failing stock call cancels the rest of its when_all: the pending price call's timeout.
      {"coroutine chronicle::with_timeout: cancelled \"cancelled\" by check_stock", 4},
      {"coroutine load_price_list: ok", 32},
      {"coroutine load_price_list: cancelled \"cancelled\" by timeout", 4},
      {"coroutine load_price_list: cancelled \"cancelled\" by chronicle::with_timeout", 4},
      {"timer timeout: ok", 4},
      {"timer timeout: cancelled by chronicle::with_timeout", 36},
      {"promise audit record: ok", 40},
      {"coroutine join_all: ok", 1},
      {"handler sync_wait: ok", 1},
      {"io socket.async_accept: ok", 40},
      {"io socket.async_accept: cancelled \"Operation aborted.\"", 1},  // the one pending at the end
      {"io socket.async_receive in async_read_until: ok", 40},
      {"io socket.async_send in async_write: ok", 40},
      {"handler io_context.execute: ok", 1},  // the post that stops the server
      // Each hop onto the pool (the request's, load_user's, check_stock's) and each price call's
      // sleep on the pool's timer: the hung ones cancelled with their price call.
      {"handler thread_pool.schedule: ok", 120},
      {"timer thread_pool.sleep_for: ok", 32},
      {"timer thread_pool.sleep_for: cancelled", 8},
  };
  EXPECT_EQ(count_outcomes(graph), expected_outcomes);

  const std::map<std::string, int> edges = count_edges(graph);
  auto edge_count = [&edges](const std::string& edge) {
    const auto found = edges.find(edge);
    return found == edges.end() ? 0 : found->second;
  };
  // Who created whom: a request by the read that received it; its fan-out by its own tasks.
  EXPECT_EQ(edge_count("socket.async_receive in async_read_until created-by socket.async_accept"), 40);
  EXPECT_EQ(edge_count("handle_request created-by socket.async_receive in async_read_until"), 40);
  EXPECT_EQ(edge_count("quote created-by handle_request"), 40);
  EXPECT_EQ(edge_count("audit record created-by handle_request"), 40);
  for (const char* child : {"load_user", "chronicle::with_timeout", "check_stock", "chronicle::when_all"})
    EXPECT_EQ(edge_count(std::string(child) + " created-by quote"), 40) << child;
  EXPECT_EQ(edge_count("load_price_list created-by quote"), 40);
  EXPECT_EQ(edge_count("timeout created-by chronicle::with_timeout"), 40);
  // Who waited on whom: the request on its quote, the quote on its when_all, the when_all on all
  // three, the with_timeout on the price call and its timer, the end of main on every request.
  EXPECT_EQ(edge_count("handle_request waits-on quote"), 40);
  EXPECT_EQ(edge_count("quote waits-on chronicle::when_all"), 40);
  for (const char* child : {"load_user", "chronicle::with_timeout", "check_stock"})
    EXPECT_EQ(edge_count(std::string("chronicle::when_all waits-on ") + child), 40) << child;
  EXPECT_EQ(edge_count("chronicle::with_timeout waits-on load_price_list"), 40);
  EXPECT_EQ(edge_count("chronicle::with_timeout waits-on timeout"), 40);
  EXPECT_EQ(edge_count("join_all waits-on handle_request"), 40);
  // The bridges: the reply's write, started in WriteReply's await_suspend, is the request's, which
  // waits on it; each hop onto the pool is its task's, which waits on it.
  EXPECT_EQ(edge_count("socket.async_send in async_write created-by handle_request"), 40);
  EXPECT_EQ(edge_count("handle_request waits-on socket.async_send in async_write"), 40);
  for (const char* hopper : {"handle_request", "load_user", "check_stock"})
    EXPECT_EQ(edge_count(std::string(hopper) + " waits-on thread_pool.schedule"), 40) << hopper;
  EXPECT_EQ(edge_count("load_price_list waits-on thread_pool.sleep_for"), 40);

  // The audit queue: each record created by its request and run by the audit thread alone.
  for (const Task& task : graph.tasks()) {
    if (task.name != "audit record") continue;
    ASSERT_EQ(task.runs.size(), 1u);
    EXPECT_EQ(trace.thread_name(task.runs.front().thread_id), "audit");
  }
}

// The path of request 3 (timed out) goes through the with_timeout's timer, waiting for the whole
// limit, and through the request's hop onto the pool, queued there: never "ran" for time it did
// not run.
TEST_F(QuoteExample, TheCriticalPathOfATimedOutRequestNamesTheTimeoutAndTheQueueing) {
  reader::Trace trace(trace_path());
  const model::TaskGraph graph = model::build_task_graph(trace);
  const auto result = run(kCli + " stats --json --critical-path 'request 3' " + trace_path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto path = nlohmann::json::parse(result.out);
  ASSERT_EQ(path["name"], "request 3");
  const double frequency = static_cast<double>(trace.description().clock.frequency_hz);
  int64_t total_ns = 0, timeout_waiting_ns = 0, hop_queued_ns = 0;
  std::map<std::string, const Task*> by_text;
  for (const Task& task : graph.tasks()) by_text[model::task_id_text(task.id)] = &task;
  std::set<std::string> states;
  for (const auto& step : path["steps"]) {
    const Task* task = by_text[step["task"].get<std::string>()];
    ASSERT_NE(task, nullptr) << step.dump();
    const std::string state = step["state"];
    const int64_t length = step["contributed_ns"];
    total_ns += length;
    states.insert(state);
    if (task->name == "timeout" && state == "waiting") timeout_waiting_ns += length;
    if (task->name == "thread_pool.schedule" && state == "queued") hop_queued_ns += length;
    if (state == "ran") {
      EXPECT_FALSE(task->runs.empty()) << task->display_name() << " 'ran' without a run";
    }
  }
  EXPECT_EQ(total_ns, path["length_ns"].get<int64_t>()) << "the steps add up to the path";
  // The timer is armed for 200 ms and fires no earlier: at least that long on the path.
  EXPECT_GE(static_cast<double>(timeout_waiting_ns), 200e6 - 1e9 / frequency) << result.out;
  // The request's hop onto the pool: the time in the pool's queue is `queued` on its hop task.
  EXPECT_GT(hop_queued_ns, 0) << "the request's queueing is named as such\n" << result.out;
  EXPECT_TRUE(states.count("ran") && states.count("queued") && states.count("waiting")) << result.out;
}

// Each request is one trace: its task, every task and handler it started (transitively), and the
// client's send and the server's receive that carried its traceparent.
TEST_F(QuoteExample, TheOtlpExportHasOneTracePerRequestWithEverythingItStartedUnderIt) {
  reader::Trace trace(trace_path());
  const model::TaskGraph graph = model::build_task_graph(trace);
  const std::string out = *directory_ / "otlp.json";
  const auto result = run(kCli + " export --format otlp -o " + out + " " + trace_path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream file(out);
  const auto document = nlohmann::json::parse(file);

  std::map<std::string, std::string> trace_of_task;  // "t2.9" -> trace id
  std::map<std::string, std::multiset<std::string>> names_by_trace;
  for (const auto& resource : document["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) {
        names_by_trace[span["traceId"]].insert(span["name"].get<std::string>());
        for (const auto& attribute : span["attributes"])
          if (attribute["key"] == "chronicle.task.id")
            trace_of_task[attribute["value"]["stringValue"]] = span["traceId"];
      }

  std::set<std::string> request_traces;
  for (const Task& request : graph.tasks()) {
    if (request.name != "handle_request") continue;
    SCOPED_TRACE(request.label);
    const std::string request_trace = trace_of_task.at(model::task_id_text(request.id));
    EXPECT_TRUE(request_traces.insert(request_trace).second) << "two requests in one trace";
    // Everything the request created, transitively, is in its trace.
    std::vector<model::TaskId> pending = {request.id};
    size_t descendants = 0;
    while (!pending.empty()) {
      const model::TaskId parent = pending.back();
      pending.pop_back();
      for (const Task* child : graph.children(parent)) {
        ++descendants;
        EXPECT_EQ(trace_of_task.at(model::task_id_text(child->id)), request_trace) << child->display_name();
        pending.push_back(child->id);
      }
    }
    // quote, when_all, load_user, with_timeout, load_price_list, timeout, check_stock, the audit
    // record, the reply's write, three hops onto the pool and the price call's sleep.
    EXPECT_EQ(descendants, 13u);
    const std::multiset<std::string>& names = names_by_trace.at(request_trace);
    EXPECT_EQ(names.count("send"), 1u) << "the client's send of the traceparent";
    EXPECT_EQ(names.count("receive"), 1u) << "the server's receive of it";
    EXPECT_EQ(names.count("socket.async_send in async_write"), 1u) << "the reply's write";
  }
  EXPECT_EQ(request_traces.size(), size_t{kRequests});
}

// The frames of `name` in a flame graph of the whole trace: their time and how many spans.
std::pair<uint64_t, uint64_t> flame_total(const nlohmann::json& flame, const std::string& name) {
  std::pair<uint64_t, uint64_t> total{0, 0};
  for (const auto& frame : flame["frames"])
    if (frame[1].get<int64_t>() >= 0 && flame["names"][frame[1].get<size_t>()] == name) {
      total.first += frame[2].get<uint64_t>();
      total.second += frame[4].get<uint64_t>();
    }
  return total;
}

// One definition of a span's time (docs/viewer.md, "A span's time"): `stats`, the flame graph in
// its wall and running modes, and range stats give the same wall and running time for every span
// of the service, to the nanosecond. The pricing call's wall time holds its sleeps (the hung ones
// until their cancellation); its running time only the pieces on the pool's threads.
TEST_F(QuoteExample, StatsTheFlameGraphAndRangeStatsAgree) {
  reader::Trace trace(trace_path());
  const analysis::Profile profile = analysis::profile_trace(trace);
  const viewer::TimelineIndex index = viewer::TimelineIndex::build(trace);
  const uint64_t duration = index.duration();
  const viewer::RangeStats range = index.range_stats(0, duration);
  const auto wall_flame = viewer::flame_json(index, 0, duration, viewer::FlameRoots::merged, viewer::FlameSource::spans,
                                             viewer::FlameMode::wall);
  const auto running_flame = viewer::flame_json(index, 0, duration, viewer::FlameRoots::merged,
                                                viewer::FlameSource::spans, viewer::FlameMode::running);
  size_t compared = 0;
  for (const analysis::SpanProfile& stats : profile.spans) {
    const std::string name = stats.category + "/" + stats.name;
    SCOPED_TRACE(name);
    EXPECT_GE(stats.duration.total, stats.running);
    EXPECT_EQ(flame_total(wall_flame, name), std::make_pair(stats.duration.total, stats.duration.count));
    EXPECT_EQ(flame_total(running_flame, name).first, stats.running);
    const auto in_range =
        std::find_if(range.top_names.begin(), range.top_names.end(),
                     [&](const viewer::NameTotal& total) { return index.site_name(total.site) == name; });
    ASSERT_NE(in_range, range.top_names.end());
    EXPECT_EQ(in_range->wall_ns, stats.duration.total);
    EXPECT_EQ(in_range->spans, stats.duration.count);
    EXPECT_EQ(in_range->running_ns, stats.running);
    ++compared;
  }
  EXPECT_EQ(compared, 6u) << "client, service and four backend spans";
  const auto pricing = std::find_if(profile.spans.begin(), profile.spans.end(),
                                    [](const analysis::SpanProfile& span) { return span.name == "pricing call"; });
  ASSERT_NE(pricing, profile.spans.end());
  // Eight price calls hang until their request's timeout or failure cancels them: 200 ms each
  // for the four timed out at least, all of it wall time, none of it running.
  EXPECT_GE(pricing->duration.total, pricing->running + 4 * uint64_t{200'000'000});
}

TEST_F(QuoteExample, TheMetricsCountRequestsByOutcome) {
  const auto result = run(kCli + " stats --json " + trace_path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto stats = nlohmann::json::parse(result.out);
  std::map<std::string, double> last;
  for (const auto& counter : stats["counters"])
    if (counter["category"] == "metrics") last[counter["name"]] = counter["last"];
  EXPECT_EQ(last["quote.requests{outcome=\"ok\"}"], 32);
  EXPECT_EQ(last["quote.requests{outcome=\"timeout\"}"], 4);
  EXPECT_EQ(last["quote.requests{outcome=\"unavailable\"}"], 4);
  EXPECT_EQ(last.count("quote.latency_seconds"), 1u);
}

}  // namespace
}  // namespace chronicle

namespace chronicle {
namespace {

// In flight mode with a ring too small for the run, each thread's ring holds its own window: a
// request created on the network thread and resolved on a worker whose window began later is
// cut, not open. Every request of this run ended (the program exited normally), so OPEN is 0 and
// the cut ones are counted as such.
TEST(QuoteExampleInFlight, TasksCutByTheWindowsAreNotCountedOpen) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const auto result =
      run(kCli + " record -q --mode flight --buffer-size 128K -o " + trace + " -- " + QUOTE_EXAMPLE + " 300 4");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto stats = run(kCli + " stats --json " + trace);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto figures = nlohmann::json::parse(stats.out);
  ASSERT_GT(figures["flight_windows"]["tasks_before_window"].get<uint64_t>(), 0u)
      << "the run is longer than a 128 KiB ring: the windows must cut it";
  uint64_t open = 0, cut = 0;
  for (const auto& kind : figures["task_kinds"]) {
    open += kind["unresolved"].get<uint64_t>();
    cut += kind.value("cut_by_window", uint64_t{0});
  }
  EXPECT_EQ(open, 0u) << figures["task_kinds"].dump(1);
  EXPECT_GT(cut, 0u);
  EXPECT_EQ(figures["flight_windows"].value("tasks_cut", uint64_t{0}), cut);
  const auto text = run(kCli + " stats " + trace);
  EXPECT_NE(text.err.find(std::to_string(cut) + " tasks unresolved in the windows are cut"), std::string::npos)
      << text.err;
  // A run whose beginning the window left out is summarised with the rest, not a warning each.
  EXPECT_EQ(text.err.find("that never began"), std::string::npos) << text.err;
  EXPECT_EQ(text.err.find("warning"), std::string::npos) << text.err;
}

}  // namespace
}  // namespace chronicle
