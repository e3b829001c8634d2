// The traced Asio echo example, recorded by `chronicle record`: its task graph shows, for every
// connection the server accepted, the accept -> read -> write chain that served it; as two
// processes, merged, the critical path of a client's read crosses into the server.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using model::Task;
using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kEchoExample = ECHO_EXAMPLE;

std::vector<const Task*> children_named(const model::TaskGraph& graph, const Task& parent, std::string_view name) {
  std::vector<const Task*> out;
  for (const Task* child : graph.children(parent.id))
    if (child->name == name) out.push_back(child);
  return out;
}

// The example as a user first runs it, with no session: it must end by itself (a counter's value
// expression is not evaluated when no session runs, so the example must not count in one).
TEST(AsioExample, RunsToTheEndWithNoSessionToo) {
  const auto result = run("timeout 60 " + kEchoExample + " 2 3");
  ASSERT_EQ(result.exit_code, 0) << "124 is the timeout: the client never finished\n" << result.err;
  EXPECT_NE(result.out.find("2 finished"), std::string::npos) << result.out;
}

TEST(AsioExample, EveryAcceptedConnectionHasItsAcceptReadWriteChain) {
  constexpr int kConnections = 5;
  constexpr int kMessages = 20;
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + kEchoExample + " " +
                          std::to_string(kConnections) + " " + std::to_string(kMessages));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  reader::Trace trace(directory / "trace");
  ASSERT_EQ(trace.events_discarded(), 0u);
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();

  uint32_t server_thread = 0;
  for (const auto& stream : trace.streams())
    if (trace.thread_name(stream.thread_id) == "server") server_thread = stream.thread_id;
  ASSERT_NE(server_thread, 0u);

  std::vector<const Task*> accepted;
  int cancelled_accepts = 0;
  for (const Task& task : graph.tasks()) {
    // Every handler that ran, ran once, on one thread, to its end.
    ASSERT_LE(task.runs.size(), 1u) << model::task_id_text(task.id);
    for (const auto& run : task.runs) EXPECT_TRUE(run.ended);
    if (task.name != "socket.async_accept") continue;
    EXPECT_EQ(task.kind, format::TaskKind::io);
    if (task.outcome == format::TaskOutcome::cancelled)
      ++cancelled_accepts;
    else
      accepted.push_back(&task);
  }
  EXPECT_EQ(cancelled_accepts, 1) << "the last accept is cancelled when the server stops";
  ASSERT_EQ(accepted.size(), size_t{kConnections});

  std::set<std::string> labels;
  for (const Task* accept : accepted) {
    SCOPED_TRACE(accept->display_name());
    labels.insert(accept->label);
    EXPECT_EQ(accept->outcome, format::TaskOutcome::ok);
    ASSERT_EQ(accept->runs.size(), 1u);
    EXPECT_EQ(accept->runs[0].thread_id, server_thread);
    // accept -> read: the accept handler starts the connection's first read (and the next accept).
    const auto reads = children_named(graph, *accept, "socket.async_receive in async_read_until");
    ASSERT_EQ(reads.size(), 1u);
    EXPECT_EQ(children_named(graph, *accept, "socket.async_accept").size(), 1u);
    // read -> write -> read -> ... until the client closes: one write per message at least.
    const Task* read = reads[0];
    int writes = 0;
    while (true) {
      EXPECT_EQ(read->kind, format::TaskKind::io);
      const auto next_writes = children_named(graph, *read, "socket.async_send in async_write");
      if (next_writes.empty()) break;
      ASSERT_EQ(next_writes.size(), 1u);
      EXPECT_EQ(read->outcome, format::TaskOutcome::ok);
      ++writes;
      const auto next_reads = children_named(graph, *next_writes[0], "socket.async_receive in async_read_until");
      ASSERT_EQ(next_reads.size(), 1u);
      EXPECT_LE(*next_writes[0]->created, *next_reads[0]->created);
      read = next_reads[0];
    }
    EXPECT_GE(writes, kMessages);
    // The chain ends with the read that saw the client close.
    EXPECT_EQ(read->outcome, format::TaskOutcome::failed);
    EXPECT_EQ(read->outcome_text, "End of file");
  }
  std::set<std::string> expected_labels;
  for (int i = 1; i <= kConnections; ++i) expected_labels.insert("accept connection " + std::to_string(i));
  EXPECT_EQ(labels, expected_labels);

  // The client's side: each connection labelled, then its first write.
  int connects = 0;
  for (const Task& task : graph.tasks()) {
    if (task.name != "socket.async_connect") continue;
    ++connects;
    EXPECT_TRUE(task.label.starts_with("client ")) << task.label;
    EXPECT_EQ(children_named(graph, task, "socket.async_send in async_write").size(), 1u);
  }
  EXPECT_EQ(connects, kConnections);
}

// A handler's invocation (its operation resolved without text, its run beginning, one instant) is
// one event in the files, 21 bytes instead of 34 (issue 44), and still two in every tool: the
// reader, record's count, and babeltrace2, which reads the one event with both halves' fields.
TEST(AsioExample, AHandlersResolutionAndRunBeginAreOneEventInTheFilesAndTwoInEveryTool) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -o " + (directory / "trace") + " -- " + kEchoExample + " 2 50");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  reader::Trace trace(directory / "trace");
  ASSERT_EQ(trace.events_discarded(), 0u);
  const auto events = test::read_all(trace);

  // In the files: no quiet resolution followed, at its instant, by the same task's run's beginning.
  uint64_t stored = 0, split_invocations = 0, invocations = 0;
  format::RawEvent previous;
  uint64_t previous_task = 0;
  test::for_each_stored_event(trace, [&](const format::RawEvent& raw, bool file_begins) {
    if (file_begins) previous = {}, previous_task = 0;
    ++stored;
    const auto id = static_cast<format::EventId>(raw.spec->id);
    invocations += id == format::EventId::task_invoke;
    uint64_t task = 0;
    if (raw.payload_size >= sizeof task) std::memcpy(&task, raw.payload, sizeof task);
    if (id == format::EventId::task_run_begin && previous.spec &&
        previous.spec->id == static_cast<uint32_t>(format::EventId::task_resolve) &&
        previous.payload_size == sizeof(format::TaskResolvePrefix) + 1 && previous.ticks == raw.ticks &&
        previous_task == task)
      ++split_invocations;
    previous = raw;
    previous_task = task;
  });
  EXPECT_EQ(split_invocations, 0u) << "of " << stored << " events in the files, " << split_invocations
                                   << " invocations took two";
  EXPECT_GT(invocations, 200u);  // 2 x 50 round trips, two handlers on each side
  EXPECT_EQ(events.size(), stored + invocations);

  // Read back as the two events, at one time, and counted as two by record and babeltrace2.
  uint64_t resolves_then_runs = 0;
  for (size_t i = 1; i < events.size(); ++i)
    resolves_then_runs += events[i].type == format::EventId::task_run_begin &&
                          events[i - 1].type == format::EventId::task_resolve && events[i - 1].text.empty() &&
                          events[i - 1].task == events[i].task && events[i - 1].ticks == events[i].ticks;
  EXPECT_GE(resolves_then_runs, invocations);
  std::smatch counted;
  ASSERT_TRUE(std::regex_search(result.err, counted, std::regex(R"(trace in .*: ([0-9,]+) events)"))) << result.err;
  std::string digits = counted[1];
  std::erase(digits, ',');
  EXPECT_EQ(std::stoull(digits), events.size()) << result.err;
  const auto babeltrace = run("babeltrace2 " + (directory / "trace") +
                              " | grep -v -e site_definition -e thread_definition -e module_definition");
  ASSERT_EQ(babeltrace.err, "");
  const auto lines = static_cast<uint64_t>(std::count(babeltrace.out.begin(), babeltrace.out.end(), '\n'));
  EXPECT_EQ(lines, stored);
  size_t at = 0;
  uint64_t invoke_lines = 0;
  while ((at = babeltrace.out.find("task_invoke:", at)) != std::string::npos) ++invoke_lines, ++at;
  EXPECT_EQ(invoke_lines, invocations);
}

TEST(AsioExample, DumpTasksPrintsTheGraph) {
  TemporaryDirectory directory;
  ASSERT_EQ(run(kCli + " record -q -o " + (directory / "trace") + " -- " + kEchoExample + " 2 3").exit_code, 0);
  const auto result = run(kCli + " dump --tasks " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_NE(result.out.find("io \"accept connection 1\" (socket.async_accept)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("resolved   cancelled at"), std::string::npos);
  EXPECT_NE(result.out.find("\"Operation aborted.\""), std::string::npos);
  EXPECT_NE(result.out.find("(server): +"), std::string::npos);
  EXPECT_NE(result.out.find("note       +"), std::string::npos);
  const auto filtered = run(kCli + " dump --tasks --name 'accept connection*' " + (directory / "trace"));
  size_t tasks = 0;
  for (size_t at = filtered.out.find("\nt"); at != std::string::npos; at = filtered.out.find("\nt", at + 1)) ++tasks;
  EXPECT_EQ(tasks, 2u) << filtered.out;
  // babeltrace2 reads the task events too, kinds and outcomes as enums.
  const auto babeltrace = run("babeltrace2 " + (directory / "trace"));
  ASSERT_EQ(babeltrace.exit_code, 0) << babeltrace.err;
  EXPECT_EQ(babeltrace.err, "");
  EXPECT_NE(babeltrace.out.find("kind = ( \"io\""), std::string::npos);
  EXPECT_NE(babeltrace.out.find("outcome = ( \"cancelled\""), std::string::npos);
}

// The port a `--server 0` run printed, once it did (0 when it did not within the limit).
int wait_for_port(const std::string& output, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  const std::string listening = "listening on port ";
  while (std::chrono::steady_clock::now() < until) {
    std::stringstream text;
    text << std::ifstream(output).rdbuf();
    const std::string got = text.str();
    if (const size_t at = got.find(listening); at != std::string::npos && got.find('\n', at) != std::string::npos)
      return std::stoi(got.substr(at + listening.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

// The spans of one OTLP export: traceId, spanId, parentSpanId, name, and whether a link names a
// remote parent.
struct OtlpSpanIds {
  std::string trace, span, parent, name;
  bool remote_parent_link = false;
};
std::vector<OtlpSpanIds> otlp_spans(const std::string& file) {
  std::ifstream in(file);
  const nlohmann::json request = nlohmann::json::parse(in);
  std::vector<OtlpSpanIds> spans;
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) {
        OtlpSpanIds ids{span["traceId"], span["spanId"], span.value("parentSpanId", ""), span["name"]};
        for (const auto& link : span.value("links", nlohmann::json::array()))
          for (const auto& attribute : link.value("attributes", nlohmann::json::array()))
            ids.remote_parent_link |= attribute["key"] == "chronicle.link";
        spans.push_back(ids);
      }
  return spans;
}

// Each host exports (or pushes) its own spans: a receive's parent is the sender's span, in the
// other host's export, as an OpenTelemetry SDK's server span has it, so that a backend that gets
// both builds one tree (a link alone makes Jaeger show a root per receive).
TEST(AsioExample, EachHostsOtlpExportParentsAReceiveOnTheSendersSpan) {
  TemporaryDirectory directory;
  const std::string server_output = directory / "server.out";
  FILE* server = popen((kCli + " record -q -o " + (directory / "server") + " -- " + kEchoExample + " --server 0 1 > " +
                        server_output + " 2>&1")
                           .c_str(),
                       "r");
  ASSERT_NE(server, nullptr);
  const int port = wait_for_port(server_output, std::chrono::seconds(60));
  if (port == 0) pclose(server);
  ASSERT_NE(port, 0) << "the server never said its port";
  const auto client = run(kCli + " record -q -o " + (directory / "client") + " -- " + kEchoExample +
                          " --client 127.0.0.1 " + std::to_string(port) + " 1 5");
  EXPECT_EQ(pclose(server), 0);
  ASSERT_EQ(client.exit_code, 0) << client.err;
  for (const char* side : {"client", "server"}) {
    const auto exported = run(kCli + " export --format otlp -o " + (directory / (std::string(side) + ".json")) + " " +
                              (directory / side));
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
  }
  const std::vector<OtlpSpanIds> client_spans = otlp_spans(directory / "client.json");
  const std::vector<OtlpSpanIds> server_spans = otlp_spans(directory / "server.json");
  std::set<std::pair<std::string, std::string>> sends;  // (trace, span) of every send, both sides
  for (const auto* spans : {&client_spans, &server_spans})
    for (const OtlpSpanIds& span : *spans)
      if (span.name == "send") sends.insert({span.trace, span.span});
  size_t receives = 0;
  for (const auto* spans : {&client_spans, &server_spans})
    for (const OtlpSpanIds& span : *spans) {
      if (span.name != "receive") continue;
      ++receives;
      EXPECT_TRUE(sends.count({span.trace, span.parent}))
          << "receive " << span.span << " has parent '" << span.parent << "', no send of trace " << span.trace;
      EXPECT_FALSE(span.remote_parent_link) << "the parent is the parent, not a link";
    }
  EXPECT_EQ(receives, 10u) << "five requests, five echoes";
}

TEST(AsioExample, TheCriticalPathOfAClientReadCrossesIntoTheServerProcess) {
  TemporaryDirectory directory;
  const std::string server_output = directory / "server.out";
  // The server, recorded, in the background: it prints its port and ends after one connection.
  FILE* server = popen((kCli + " record -q -o " + (directory / "server") + " -- " + kEchoExample + " --server 0 1 > " +
                        server_output + " 2>&1")
                           .c_str(),
                       "r");
  ASSERT_NE(server, nullptr);
  const int port = wait_for_port(server_output, std::chrono::seconds(60));
  if (port == 0) pclose(server);
  ASSERT_NE(port, 0) << "the server never said its port";
  const auto client = run(kCli + " record -q -o " + (directory / "client") + " -- " + kEchoExample +
                          " --client 127.0.0.1 " + std::to_string(port) + " 1 5");
  EXPECT_EQ(pclose(server), 0);
  ASSERT_EQ(client.exit_code, 0) << client.err;
  const auto merged =
      run(kCli + " merge " + (directory / "client") + " " + (directory / "server") + " -o " + (directory / "merged"));
  ASSERT_EQ(merged.exit_code, 0) << merged.err;

  // The client's last read waited for the server's last echo: its path runs through the server,
  // whose read waited for the client's message, and so on back.
  const reader::Trace client_trace(directory / "client");
  const model::TaskGraph client_graph = model::build_task_graph(client_trace);
  const Task* last_read = nullptr;
  for (const Task& task : client_graph.tasks())
    if (task.name == "socket.async_receive in async_read_until" && task.resolved &&
        task.outcome == format::TaskOutcome::ok && (!last_read || *task.resolved > *last_read->resolved))
      last_read = &task;
  ASSERT_NE(last_read, nullptr);
  const std::string target = std::to_string(client_trace.description().pid) + "/" + model::task_id_text(last_read->id);
  const auto path = run(kCli + " stats --json --critical-path " + target + " " + (directory / "merged"));
  ASSERT_EQ(path.exit_code, 0) << path.err;
  const auto steps = nlohmann::json::parse(path.out)["steps"];
  std::set<std::string> processes;
  size_t messages = 0;
  for (const auto& step : steps) {
    processes.insert(step.value("process", ""));
    messages += step["what"].get<std::string>().starts_with("waited for a message from another process");
  }
  EXPECT_EQ(processes.size(), 2u) << path.out;
  // Five round trips: the echo and the request of each, back to the first request.
  EXPECT_EQ(messages, 10u) << path.out;
}

}  // namespace
}  // namespace chronicle
