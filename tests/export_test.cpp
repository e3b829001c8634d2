// `chronicle export`: each format read back by a reader that is not ours (Python's json module,
// the official OTLP protobuf definitions, SQLite, speedscope's Chrome importer) and compared with
// the model of the same trace; on the Asio echo example's trace, the coroutine example's, a
// synthetic trace with every kind of event, a record run of two processes, and on bad input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/metrics.hpp>
#include <chronicle/task.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include "export/export_common.hpp"
#include "export/otlp_json.hpp"
#include "model/task_graph.hpp"
#include "reader/trace_directory.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

// The escaping reads 8 bytes at a time where it can: a byte that needs escaping, or a multi-byte
// character, must be found wherever it falls in a word, and the text must read back the same
// (bytes that are not UTF-8 as U+FFFD).
TEST(JsonText, StringsReadBackWhereverTheSpecialByteFalls) {
  const std::vector<std::pair<std::string, std::string>> specials = {{std::string(1, '\0'), std::string(1, '\0')},
                                                                     {"\x01", "\x01"},
                                                                     {"\x1f", "\x1f"},
                                                                     {"\n", "\n"},
                                                                     {"\"", "\""},
                                                                     {"\\", "\\"},
                                                                     {"\x7f", "\x7f"},
                                                                     {" ", " "},
                                                                     {"\xc3\xa9", "\xc3\xa9"},
                                                                     {"\xe2\x82\xac", "\xe2\x82\xac"},
                                                                     {"\x80", "\xEF\xBF\xBD"},
                                                                     {"\xff", "\xEF\xBF\xBD"},
                                                                     {"\xc3", "\xEF\xBF\xBD"}};
  for (const auto& [special, decoded] : specials)
    for (size_t length : {1, 7, 8, 9, 16, 23}) {
      for (size_t at = 0; at < length; ++at) {
        const std::string text = std::string(at, 'a') + special + std::string(length - at, 'b');
        std::string json;
        exports::append_json_string(json, text);
        const std::string expected = std::string(at, 'a') + decoded + std::string(length - at, 'b');
        ASSERT_EQ(nlohmann::json::parse(json).get<std::string>(), expected) << json;
      }
    }
  std::string json;
  exports::append_json_string(json, "plain text of more than eight bytes");
  EXPECT_EQ(json, "\"plain text of more than eight bytes\"");
}

TEST(JsonText, NumbersAsTheExportsWriteThem) {
  std::string text;
  for (int64_t ns : {int64_t{0}, int64_t{-1}, int64_t{999}, int64_t{1000}, int64_t{1234567},
                     std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    exports::append_microseconds(text, ns);
    text += ' ';
  }
  EXPECT_EQ(text, "0.000 -0.001 0.999 1.000 1234.567 -9223372036854775.808 9223372036854775.807 ");
  text.clear();
  exports::append_hex64(text, 0x1a2b3c4d5e6f7081ULL);
  exports::append_hex64(text, 15);
  exports::append_decimal(text, int64_t{-42});
  exports::append_decimal(text, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(text, "1a2b3c4d5e6f7081000000000000000f-4218446744073709551615");
}

using format::EventId;
using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kEchoExample = ECHO_EXAMPLE;
const std::string kCoroutinesExample = COROUTINES_EXAMPLE;
const std::string kForkExec = FORK_EXEC;
const std::string kChromeCheck = CHROME_CHECK;
const std::string kOtlpCheckDirectory = OTLP_CHECK_DIR;
const std::string kSpeedscopeCheckDirectory = SPEEDSCOPE_CHECK_DIR;

// What the model and the raw events of one trace say the exports must hold.
struct Expected {
  std::string process_name;
  std::array<uint8_t, 16> uuid{};
  size_t streams = 0;
  size_t span_begins = 0;
  size_t span_continuations = 0;  // a task's span open when the task runs again: a piece in that run
  size_t instants = 0;
  size_t notes = 0;
  size_t counters = 0;
  size_t tasks = 0;
  size_t runs = 0;
  size_t idle = 0;
  size_t edges = 0;
  size_t waits = 0;
  size_t messages = 0;  // sends and receives: OTLP spans of kind CLIENT and SERVER
  std::vector<std::pair<model::TaskId, std::string>> failed;     // task, error text
  std::vector<std::pair<model::TaskId, model::TaskId>> parents;  // task, creating task
  std::vector<std::pair<uint64_t, std::string>> failed_spans;    // span id, status message
};

Expected expect(const std::string& directory) {
  reader::Trace trace(directory);
  Expected expected;
  expected.process_name = trace.description().process_name;
  expected.uuid = trace.description().uuid;
  expected.streams = trace.streams().size();
  reader::SpanPairing pairing(trace);
  // Tasks created with no span or receive open around them in their creator: their OTLP parent is
  // the creating task's span (inside one, it is that span or receive).
  std::map<std::pair<uint32_t, model::TaskId>, int> open_receives;  // by owner: thread, task
  std::set<model::TaskId> created_bare;
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    const model::TaskId running = pairing.running_task(event.thread_id);
    const auto owner = std::make_pair(running != 0 ? 0u : event.thread_id, running);
    switch (event.type) {
      case EventId::span_begin:
        ++expected.span_begins;
        break;
      case EventId::span_end:  // an exception left it (the synthetic trace's failing leaf)
        if (event.span && event.span->failed)
          expected.failed_spans.emplace_back(event.span->span_id, event.span->status_message);
        break;
      case EventId::context_send:
        ++expected.messages;
        break;
      case EventId::context_receive:
        ++expected.messages;
        ++open_receives[owner];
        break;
      case EventId::context_receive_end:
        if (event.span)
          --open_receives[std::make_pair(event.span->task != 0 ? 0u : event.span->thread_id, event.span->task)];
        break;
      case EventId::task_create:
        if (event.depth == 0 && open_receives[owner] == 0) created_bare.insert(event.task);
        break;
      case EventId::task_run_begin:
        if (const auto* open = pairing.open_in_task(event.task)) expected.span_continuations += open->size();
        break;
      case EventId::instant:
        ++expected.instants;
        break;
      case EventId::note:
        ++expected.notes;
        break;
      case EventId::counter:
      case EventId::counter_float:
        ++expected.counters;
        break;
      default:
        break;
    }
    return true;
  });
  const model::TaskGraph graph = model::build_task_graph(trace);
  expected.tasks = graph.tasks().size();
  for (const auto& task : graph.tasks()) {
    expected.runs += task.runs.size();
    if (task.resolved && task.outcome == format::TaskOutcome::failed)
      expected.failed.emplace_back(task.id, task.outcome_text);
    if (task.parent != 0 && graph.find(task.parent) && created_bare.count(task.id))
      expected.parents.emplace_back(task.id, task.parent);
  }
  expected.idle = graph.idle().size();
  expected.edges = graph.edges().size();
  for (const auto& edge : graph.edges()) expected.waits += edge.kind == model::EdgeKind::waits_on;
  return expected;
}

std::vector<Expected> expect_all(const std::string& directory) {
  std::vector<Expected> all;
  for (const auto& path : reader::find_traces(directory)) all.push_back(expect(path));
  return all;
}

void export_to(const std::string& trace, const std::string& format, const std::string& output) {
  const auto result = run(kCli + " export " + trace + " --format " + format + " -o " + output);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_NE(result.err.find("wrote " + output), std::string::npos) << result.err;
}

// --- Chrome JSON ------------------------------------------------------------------------------

void check_chrome(const std::string& trace, const TemporaryDirectory& scratch) {
  const std::string output = scratch / "trace.json";
  ASSERT_NO_FATAL_FAILURE(export_to(trace, "chrome", output));
  const auto result = run("python3 " + kChromeCheck + " " + output);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto summary = nlohmann::json::parse(result.out);
  EXPECT_TRUE(summary["problems"].empty())
      << summary["problem_count"] << " problems, e.g. " << summary["problems"].dump(2);

  size_t complete = 0, instants = 0, counters = 0, tasks = 0, metadata = 0;
  for (const Expected& expected : expect_all(trace)) {
    complete += expected.span_begins + expected.span_continuations + expected.runs + expected.idle;
    instants += expected.instants + expected.notes;
    counters += expected.counters;
    tasks += expected.tasks;
    metadata += 1 + expected.streams;  // process name, thread names
  }
  const auto& phases = summary["phases"];
  auto count = [&](const char* phase) { return phases.contains(phase) ? phases[phase].get<size_t>() : size_t{0}; };
  // Every slice (span, task run, idle time) is a B/E pair: see docs/export.md.
  EXPECT_EQ(count("X"), 0u);
  EXPECT_EQ(count("B"), complete);
  EXPECT_EQ(count("E"), complete);
  EXPECT_EQ(count("i"), instants);
  EXPECT_EQ(count("C"), counters);
  EXPECT_EQ(count("b"), tasks);
  EXPECT_EQ(count("e"), tasks);
  EXPECT_EQ(count("M"), metadata);
  EXPECT_EQ(count("s"), count("f"));
  EXPECT_EQ(summary["flows"].get<size_t>(), count("s"));
  EXPECT_EQ(summary["metadata"]["process_name"].get<size_t>(), reader::find_traces(trace).size());
  EXPECT_EQ(summary["pids"].size(), reader::find_traces(trace).size()) << "one pid per process";
}

// speedscope's own importer (tests/speedscope) reads the Chrome export without a warning: it warns
// when an end is not that of the innermost open slice, as mis-nested timestamps make it.
void check_speedscope(const std::string& trace, const TemporaryDirectory& scratch) {
  if (!std::filesystem::exists(kSpeedscopeCheckDirectory + "/node_modules/speedscope/dist/release"))
    GTEST_SKIP() << "speedscope is not installed: run scripts/install-deps.sh (npm ci in tests/speedscope)";
  const std::string output = scratch / "trace.json";
  ASSERT_NO_FATAL_FAILURE(export_to(trace, "chrome", output));
  const auto result = run("node " + kSpeedscopeCheckDirectory + "/check_speedscope.js " + output);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find(": ok (Importing as Trace Event Format profile"), std::string::npos) << result.out;
}

// --- OTLP ------------------------------------------------------------------------------------

std::string hex_id(uint64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

void check_otlp(const std::string& trace, const TemporaryDirectory& scratch) {
  ASSERT_TRUE(std::filesystem::exists(kOtlpCheckDirectory + "/node_modules/@opentelemetry/otlp-transformer"))
      << "the OTLP definitions are not installed: run scripts/install-deps.sh (npm ci in tests/otlp)";
  const std::string output = scratch / "trace.otlp.json";
  ASSERT_NO_FATAL_FAILURE(export_to(trace, "otlp", output));
  nlohmann::json resources = nlohmann::json::array();
  for (const Expected& expected : expect_all(trace)) {
    const exports::OtlpIds ids(expected.uuid);
    nlohmann::json errors = nlohmann::json::array();
    for (const auto& [task, message] : expected.failed)
      errors.push_back({{"spanId", hex_id(ids.task_span(task))}, {"message", message}});
    for (const auto& [span, message] : expected.failed_spans)
      errors.push_back({{"spanId", hex_id(span)}, {"message", message}});
    nlohmann::json parents = nlohmann::json::array();
    for (const auto& [task, parent] : expected.parents)
      parents.push_back({hex_id(ids.task_span(task)), hex_id(ids.task_span(parent))});
    resources.push_back({{"service", expected.process_name},
                         {"spans", expected.span_begins + expected.tasks + expected.messages},
                         {"task_spans", expected.tasks},
                         {"errors", errors},
                         {"parents", parents}});
  }
  const std::string expectations = scratch / "expected.json";
  std::ofstream(expectations) << nlohmann::json{{"resources", resources}}.dump();
  const auto result = run("cd " + kOtlpCheckDirectory + " && node check_otlp.js " + output + " " + expectations);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find(": ok"), std::string::npos) << result.out;
}

// --- SQLite ----------------------------------------------------------------------------------

class Database {
 public:
  explicit Database(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      throw std::runtime_error(sqlite3_errmsg(db_));
  }
  ~Database() { sqlite3_close(db_); }
  // The first column of each row, as text.
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::vector<std::string> values;
    while (sqlite3_step(statement) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(statement, 0);
      values.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
    }
    sqlite3_finalize(statement);
    return values;
  }
  size_t count(const std::string& sql) { return std::stoull(column(sql).at(0)); }

 private:
  sqlite3* db_ = nullptr;
};

// The queries docs/export.md shows: they must run on every export.
const char* const kDocumentedQueries[] = {
    R"sql(SELECT s.category || '/' || s.name AS span_name, count(*) AS calls,
            sum(s.duration_ns - coalesce(c.child_ns, 0)) / 1000 AS self_us, sum(s.duration_ns) / 1000 AS total_us
     FROM spans s LEFT JOIN (SELECT parent, sum(duration_ns) AS child_ns FROM spans GROUP BY parent) c ON c.parent = s.span
     GROUP BY span_name ORDER BY self_us DESC LIMIT 10)sql",
    R"sql(SELECT t.task_text, t.name, t.outcome_text AS error, p.task_text AS creator, p.name AS creator_name
     FROM tasks t LEFT JOIN tasks p ON p.process = t.process AND p.task = t.parent
     WHERE t.outcome = 'failed' ORDER BY t.resolved_ns)sql",
    R"sql(SELECT category || '/' || name AS counter, strftime('%H:%M', at_ns / 1000000000, 'unixepoch') AS minute,
            max(value) AS max, count(*) AS samples
     FROM counters GROUP BY counter, minute ORDER BY counter, minute)sql",
};

void check_sqlite(const std::string& trace, const TemporaryDirectory& scratch) {
  const std::string output = scratch / "trace.sqlite";
  ASSERT_NO_FATAL_FAILURE(export_to(trace, "sqlite", output));
  size_t spans = 0, notes = 0, counters = 0, tasks = 0, runs = 0, edges = 0, failed = 0;
  for (const Expected& expected : expect_all(trace)) {
    spans += expected.span_begins;
    notes += expected.notes + expected.instants;
    counters += expected.counters;
    tasks += expected.tasks;
    runs += expected.runs;
    edges += expected.edges;
    failed += expected.failed.size();
  }
  Database db(output);
  EXPECT_EQ(db.count("SELECT count(*) FROM processes"), reader::find_traces(trace).size());
  EXPECT_EQ(db.count("SELECT count(*) FROM spans"), spans);
  EXPECT_EQ(db.count("SELECT count(*) FROM notes"), notes);
  EXPECT_EQ(db.count("SELECT count(*) FROM counters"), counters);
  EXPECT_EQ(db.count("SELECT count(*) FROM tasks"), tasks);
  EXPECT_EQ(db.count("SELECT count(*) FROM task_runs"), runs);
  EXPECT_EQ(db.count("SELECT count(*) FROM edges"), edges);
  EXPECT_EQ(db.count("SELECT count(*) FROM tasks WHERE outcome = 'failed'"), failed);
  EXPECT_GT(db.count("SELECT count(*) FROM threads"), 0u);
  EXPECT_GT(db.count("SELECT count(*) FROM strings"), 0u);
  EXPECT_EQ(db.count("SELECT count(*) FROM spans WHERE end_ns < begin_ns OR duration_ns != end_ns - begin_ns"), 0u);
  EXPECT_EQ(db.count("SELECT count(*) FROM spans c WHERE parent IS NOT NULL AND NOT EXISTS "
                     "(SELECT 1 FROM spans p WHERE p.span = c.parent AND p.depth = c.depth - 1)"),
            0u)
      << "every parent span exists, one level up";
  for (const char* query : kDocumentedQueries) EXPECT_NO_THROW(db.column(query)) << query;
  EXPECT_EQ(db.column(kDocumentedQueries[1]).size(), failed);
}

// --- the traces ------------------------------------------------------------------------------

class EchoTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    const auto result = run(kCli + " record -q -o " + (*directory_ / "trace") + " -- " + kEchoExample + " 3 20");
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
  }
  static std::string trace() { return *directory_ / "trace"; }
  TemporaryDirectory scratch_;
  static inline TemporaryDirectory* directory_ = nullptr;
};

TEST_F(EchoTrace, ChromeJsonMatchesTheModel) {
  check_chrome(trace(), scratch_);
}
TEST_F(EchoTrace, ChromeJsonNestsInSpeedscope) {
  check_speedscope(trace(), scratch_);
}
TEST_F(EchoTrace, OtlpDecodesWithTheOfficialDefinitions) {
  check_otlp(trace(), scratch_);
}
TEST_F(EchoTrace, SqliteCountsMatchTheModel) {
  check_sqlite(trace(), scratch_);
}

// The coroutine example: a task's run ends at the very tick its awaiter's run begins on the same
// thread (symmetric transfer), where timestamps added as doubles used to overlap. Recorded a few
// times: whether a boundary rounds up depends on where in the trace it falls.
class CoroutineTrace : public ::testing::Test {
 protected:
  static constexpr int kRuns = 4;
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    for (int i = 0; i < kRuns; ++i) {
      const auto result = run(kCli + " record -q -o " + trace(i) + " -- " + kCoroutinesExample);
      ASSERT_EQ(result.exit_code, 0) << result.err;
    }
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
  }
  static std::string trace(int i) { return *directory_ / ("trace" + std::to_string(i)); }
  static inline TemporaryDirectory* directory_ = nullptr;
};

TEST_F(CoroutineTrace, ChromeJsonNests) {
  for (int i = 0; i < kRuns; ++i) {
    SCOPED_TRACE(trace(i));
    const TemporaryDirectory scratch;
    check_chrome(trace(i), scratch);
  }
}
// Tasks created inside a span have that span as parent and share its trace (docs/export.md): the
// example's coroutines, started inside the thread's span "main", are one trace under it.
TEST_F(CoroutineTrace, OtlpTasksCreatedInsideASpanAreItsChildren) {
  const TemporaryDirectory scratch;
  const std::string output = scratch / "spans.json";
  const auto exported = run(kCli + " export " + trace(0) + " --format otlp -o " + output);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream file(output);
  const nlohmann::json request = nlohmann::json::parse(file);
  std::set<std::string> traces;
  std::vector<std::string> roots;
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) {
        traces.insert(span["traceId"].get<std::string>());
        if (span.value("parentSpanId", "").empty()) roots.push_back(span["name"].get<std::string>());
      }
  EXPECT_EQ(roots, std::vector<std::string>{"main"});
  EXPECT_EQ(traces.size(), 1u);
}

// The resource as OpenTelemetry's conventions have it: service.name is the program's whole name
// (the kernel cuts "coroutines_example" to "coroutines_exam"), else OTEL_SERVICE_NAME or
// --service-name; OTEL_RESOURCE_ATTRIBUTES adds attributes, never over the recorded process's.
TEST_F(CoroutineTrace, OtlpResourceFollowsTheOtelConventions) {
  const TemporaryDirectory scratch;
  auto resource_of = [&](const std::string& prefix, const std::string& flags) {
    const std::string output = scratch / "spans.json";
    const auto exported = run(prefix + kCli + " export --force " + trace(0) + " --format otlp -o " + output + flags);
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    std::ifstream file(output);
    const nlohmann::json request = nlohmann::json::parse(file);
    std::map<std::string, std::string> attributes;
    for (const auto& attribute : request["resourceSpans"][0]["resource"]["attributes"])
      attributes[attribute["key"]] = attribute["value"].begin().value().dump();
    return attributes;
  };
  EXPECT_EQ(resource_of("env -u OTEL_SERVICE_NAME -u OTEL_RESOURCE_ATTRIBUTES ", "")["service.name"],
            "\"coroutines_example\"");
  const std::string environment =
      "OTEL_SERVICE_NAME=checkout OTEL_RESOURCE_ATTRIBUTES='deployment.environment=prod,team=a%20b,host.name=x' ";
  auto attributes = resource_of(environment, "");
  EXPECT_EQ(attributes["service.name"], "\"checkout\"");
  EXPECT_EQ(attributes["deployment.environment"], "\"prod\"");
  EXPECT_EQ(attributes["team"], "\"a b\"");
  EXPECT_NE(attributes["host.name"], "\"x\"") << "the recorded host, not the environment's";
  EXPECT_EQ(resource_of(environment, " --service-name payments")["service.name"], "\"payments\"");
  const auto malformed = run("OTEL_RESOURCE_ATTRIBUTES=novalue " + kCli + " export --force " + trace(0) +
                             " --format otlp -o " + (scratch / "bad.json"));
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.err.find("OTEL_RESOURCE_ATTRIBUTES"), std::string::npos) << malformed.err;
}

// The same rule in SQLite: tasks.parent_span is the span open where the task was created.
TEST_F(CoroutineTrace, SqliteTasksCreatedInsideASpanNameIt) {
  const TemporaryDirectory scratch;
  const std::string output = scratch / "trace.sqlite";
  const auto exported = run(kCli + " export " + trace(0) + " --format sqlite -o " + output);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  Database db(output);
  EXPECT_EQ(db.column("SELECT s.name FROM tasks t JOIN spans s ON s.span = t.parent_span WHERE t.name = 'request'"),
            std::vector<std::string>{"main"});
  EXPECT_EQ(db.count("SELECT count(*) FROM tasks WHERE parent IS NULL AND parent_span IS NULL"), 0u);
}

TEST_F(CoroutineTrace, ChromeJsonNestsInSpeedscope) {
  for (int i = 0; i < kRuns; ++i) {
    SCOPED_TRACE(trace(i));
    const TemporaryDirectory scratch;
    check_speedscope(trace(i), scratch);
  }
}

// Every kind of event: nested and unfinished spans on two threads, instants, notes (one with a
// cut UTF-8 character), integer and float counters, coroutines that wait and fail, a promise
// resolved by another task, an event loop's idle time.
task<int> leaf(int n) {
  CHRONICLE_SPAN("synthetic", "leaf work");
  CHRONICLE_NOTE("synthetic", "leaf {}", n);
  if (n == 2) throw std::runtime_error("checksum \"mismatch\"");
  co_return n;
}

task<int> root_task() {
  int total = co_await leaf(1);
  try {
    total += co_await leaf(2).named("B.read");
  } catch (const std::exception&) {
    total = -1;
  }
  co_return total;
}

void record_synthetic(const std::string& output, const std::string& shm_dir) {
  Config config;
  config.output = output;
  config.shm_dir = shm_dir;
  ASSERT_TRUE(start(config)) << last_error();
  set_thread_name("main");
  {
    CHRONICLE_SPAN("synthetic", "outer");
    for (int i = 0; i < 3; ++i) {
      CHRONICLE_SPAN("synthetic", "inner");
      CHRONICLE_COUNTER("synthetic", "queue depth", i);
      CHRONICLE_COUNTER("synthetic", "load", 0.5 * i);
    }
    CHRONICLE_INSTANT("synthetic", "checkpoint");
    const std::string cut = "caf\xC3\xA9 \xC3";  // ends in the middle of a character
    CHRONICLE_NOTE("synthetic", "text {} with \"quotes\"\n and a newline", cut);
  }
  EXPECT_EQ(sync_wait(root_task()), -1);
  const TaskId reply = create_task(TaskKind::promise, "reply");
  std::thread worker([reply] {
    set_thread_name("worker");
    const TaskId resolver = create_task(TaskKind::handler, "timeout handler");
    {
      TaskRunScope running(resolver);
      CHRONICLE_SPAN("synthetic", "worker span");
      resolve_task(reply, TaskOutcome::failed, "timeout");
    }
    resolve_task(resolver, TaskOutcome::ok);
  });
  worker.join();
  { TaskRunScope continuation(reply); }  // the reply's continuation: the end of the resolution arrow
  {
    LoopIdleScope idle;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHRONICLE_SPAN_BEGIN("synthetic", "never ended");
  stop();
}

class SyntheticTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    record_synthetic(*directory_ / "trace", directory_->path());
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
  }
  static std::string trace() { return *directory_ / "trace"; }
  TemporaryDirectory scratch_;
  static inline TemporaryDirectory* directory_ = nullptr;
};

TEST_F(SyntheticTrace, HoldsWhatTheTestsExpect) {
  const Expected expected = expect(trace());
  EXPECT_EQ(expected.span_begins, 8u);  // outer, 3 inner, 2 leaf work, worker span, never ended
  EXPECT_EQ(expected.failed.size(), 2u);
  EXPECT_GE(expected.waits, 2u);
  EXPECT_GE(expected.idle, 1u);
}
TEST_F(SyntheticTrace, ChromeJsonMatchesTheModel) {
  check_chrome(trace(), scratch_);
  const auto summary = nlohmann::json::parse(run("python3 " + kChromeCheck + " " + (scratch_ / "trace.json")).out);
  EXPECT_TRUE(summary["flow_names"].contains("waits on")) << summary.dump();
  EXPECT_TRUE(summary["flow_names"].contains("created")) << summary.dump();
  EXPECT_TRUE(summary["flow_names"].contains("resolved")) << summary.dump();
}
// A note shows as what it said ("leaf 1"), not as the format string every leaf shares.
TEST_F(SyntheticTrace, ChromeJsonNotesAreNamedByTheirText) {
  const std::string output = scratch_ / "notes.json";
  ASSERT_NO_FATAL_FAILURE(export_to(trace(), "chrome", output));
  std::ifstream file(output);
  const auto document = nlohmann::json::parse(file);
  std::vector<std::string> leaf_notes;
  for (const auto& event : document["traceEvents"]) {
    if (event.value("ph", "") != "i") continue;
    const std::string name = event.value("name", "");
    EXPECT_NE(name, "leaf {}") << event.dump();
    if (name.starts_with("leaf ")) {
      leaf_notes.push_back(name);
      EXPECT_EQ(event["args"]["text"], name) << event.dump();
    }
  }
  std::sort(leaf_notes.begin(), leaf_notes.end());
  EXPECT_EQ(leaf_notes, (std::vector<std::string>{"leaf 1", "leaf 2"}));
}
TEST_F(SyntheticTrace, OtlpDecodesWithTheOfficialDefinitions) {
  check_otlp(trace(), scratch_);
}
TEST_F(SyntheticTrace, SqliteCountsMatchTheModel) {
  check_sqlite(trace(), scratch_);
  Database db(scratch_ / "trace.sqlite");
  EXPECT_EQ(db.column("SELECT name FROM spans WHERE unfinished = 1"), std::vector<std::string>{"never ended"});
  EXPECT_EQ(db.column("SELECT outcome_text FROM tasks WHERE outcome = 'failed' ORDER BY resolved_ns"),
            (std::vector<std::string>{"checksum \"mismatch\"", "timeout"}));
  EXPECT_EQ(db.column("SELECT p.name FROM spans c JOIN spans p ON p.span = c.parent WHERE c.name = 'inner'"),
            (std::vector<std::string>{"outer", "outer", "outer"}));
}

// --- several processes -------------------------------------------------------------------------

// A metric counter's rows carry the running total its increments make (value: as traced);
// other counters have no total.
TEST(ExportCounters, SqliteMetricCounterRowsCarryTheTotal) {
  TemporaryDirectory directory;
  Counter requests{"test.export_requests"};
  const Config config = test::test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  for (int k = 0; k < 5; ++k) requests.add(2);
  CHRONICLE_COUNTER("export", "level", 7);
  stop();
  const std::string output = directory / "out.db";
  const auto result = run(kCli + " export " + config.output + " --format sqlite -o " + output);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  Database db(output);
  EXPECT_EQ(db.column("SELECT value || ' ' || total FROM counters WHERE name = 'test.export_requests' ORDER BY at_ns"),
            (std::vector<std::string>{"2 2", "2 4", "2 6", "2 8", "2 10"}));
  EXPECT_EQ(db.column("SELECT coalesce(total, 'none') FROM counters WHERE name = 'level'"),
            (std::vector<std::string>{"none"}));
}

TEST(ExportProcesses, EveryProcessOfARecordRunIsInOneFile) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + kForkExec);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(reader::find_traces(directory / "trace").size(), 2u);
  check_chrome(directory / "trace", directory);
  check_otlp(directory / "trace", directory);
  check_sqlite(directory / "trace", directory);
}

// --- the command on bad input and bad output ---------------------------------------------------

class ExportCommand : public EchoTrace {};

TEST_F(ExportCommand, ATruncatedTraceIsExportedWithAWarningNamingTheFileAndOffset) {
  const std::string copy = scratch_ / "truncated";
  std::filesystem::copy(trace(), copy);
  std::string stream;
  for (const auto& entry : std::filesystem::directory_iterator(copy))
    if (entry.path().filename().string().starts_with("thread-")) stream = entry.path().string();
  ASSERT_FALSE(stream.empty());
  std::filesystem::resize_file(stream, std::filesystem::file_size(stream) - 1000);
  // The damaged packet is skipped; the rest of the trace is exported.
  for (const char* format : {"chrome", "otlp", "sqlite"}) {
    const std::string output = scratch_ / (std::string("out.") + format);
    const auto result = run(kCli + " export " + copy + " --format " + format + " -o " + output);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("warning"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(stream + ": offset"), std::string::npos) << result.err;
    EXPECT_TRUE(std::filesystem::exists(output));
    EXPECT_FALSE(std::filesystem::exists(output + ".partial"));
  }
}

TEST_F(ExportCommand, NotATraceIsBadInput) {
  const auto result = run(kCli + " export " + scratch_.path() + " --format chrome -o " + (scratch_ / "out.json"));
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("no trace here"), std::string::npos) << result.err;
}

TEST_F(ExportCommand, AnUnwritableOutputIsAClearError) {
  const std::string output = scratch_ / "no-such-directory/out.json";
  const auto result = run(kCli + " export " + trace() + " --format chrome -o " + output);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("cannot create"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("No such file or directory"), std::string::npos) << result.err;
}

TEST_F(ExportCommand, AnExistingOutputIsKeptUnlessForced) {
  const std::string output = scratch_ / "out.db";
  std::ofstream(output) << "precious";
  auto result = run(kCli + " export " + trace() + " --format sqlite -o " + output);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("--force"), std::string::npos) << result.err;
  EXPECT_EQ(std::filesystem::file_size(output), 8u);
  result = run(kCli + " export " + trace() + " --format sqlite --force -o " + output);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_GT(Database(output).count("SELECT count(*) FROM tasks"), 0u);
}

// `-o /dev/null --force` as root replaced /dev/null with a regular file: the export was written
// next to the output and renamed over it. A device or a pipe is written in place; a FIFO stands in
// for the device here.
TEST_F(ExportCommand, APipeOrDeviceOutputIsWrittenInPlace) {
  const std::string fifo = scratch_ / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int read_end = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(read_end, 0);
  std::atomic<bool> exported{false};
  std::string received;
  std::thread reader([&] {
    char buffer[1 << 16];
    while (true) {
      const ssize_t got = read(read_end, buffer, sizeof buffer);
      if (got > 0) {
        received.append(buffer, static_cast<size_t>(got));
        continue;
      }
      if (exported.load()) break;  // the writer is gone and the pipe is empty
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const auto result = run(kCli + " export " + trace() + " --format chrome --force -o " + fifo);
  exported = true;
  reader.join();
  close(read_end);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_FALSE(std::filesystem::exists(fifo + ".partial"));
  EXPECT_TRUE(nlohmann::json::accept(received)) << received.size() << " bytes received";
  // SQLite needs a file it can seek in: refused, and the pipe is left as it was.
  const auto sqlite = run(kCli + " export " + trace() + " --format sqlite -o " + fifo);
  EXPECT_EQ(sqlite.exit_code, 1) << sqlite.err;
  EXPECT_NE(sqlite.err.find("regular file"), std::string::npos) << sqlite.err;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
}

TEST_F(ExportCommand, AnUnknownFormatIsRefused) {
  const auto result = run(kCli + " export " + trace() + " --format xml -o " + (scratch_ / "out"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("xml"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace chronicle
