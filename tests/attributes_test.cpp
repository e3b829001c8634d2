// Attributes, status and runtime names (issue 43, items 1 to 4): what a trace point says about its
// span reaches that span, and only it, in the reader's pairing, dump, stats --group-by, the OTLP
// export and babeltrace2.
#include <gtest/gtest.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>
#include <chronicle/coro.hpp>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;
using test::test_config;

const std::string kCli = CHRONICLE_CLI;

// Every span of the trace as the pairing ends it (closed at the end when never ended), by name.
std::multimap<std::string, reader::PairedSpan> spans_by_name(const reader::Trace& trace) {
  std::multimap<std::string, reader::PairedSpan> spans;
  reader::SpanPairing pairing(trace);
  uint64_t last = 0;
  auto keep = [&](const reader::PairedSpan& span) {
    const reader::Site* site = trace.site(span.site_id);
    spans.emplace(site ? site->name : "?", span);
  };
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    last = std::max(last, event.ticks);
    if (event.type == format::EventId::span_end && event.span) keep(*event.span);
    return true;
  });
  for (const reader::PairedSpan& span : pairing.close_all(last)) keep(span);
  return spans;
}

std::map<std::string, std::string> attribute_texts(const reader::PairedSpan& span) {
  std::map<std::string, std::string> texts;
  for (const reader::SpanAttribute& attribute : span.attributes)
    texts[attribute.key] = reader::attribute_text(attribute);
  return texts;
}

const reader::SpanAttribute* attribute(const reader::PairedSpan& span, const std::string& key) {
  for (const reader::SpanAttribute& found : span.attributes)
    if (found.key == key) return &found;
  return nullptr;
}

int g_evaluations = 0;
int counted(int value) {
  ++g_evaluations;
  return value;
}

void handle_request(const std::string& route, int64_t user) {
  CHRONICLE_SPAN("http", "server");
  CHRONICLE_SPAN_ARGS("http", "request", "http.route", route, "user.id", user, "ratio", 0.25, "cached", true, "big",
                      std::numeric_limits<uint64_t>::max(), "small", uint32_t{7}, "literal", "text");
  CHRONICLE_SPAN("http", "inner");
}

TEST(Attributes, SpanArgsBelongToTheirSpanWithTheirTypes) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  handle_request("/quote", 42);
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  ASSERT_EQ(spans.count("request"), 1u);
  const reader::PairedSpan& request = spans.find("request")->second;
  EXPECT_EQ(attribute_texts(request), (std::map<std::string, std::string>{{"http.route", "/quote"},
                                                                          {"user.id", "42"},
                                                                          {"ratio", "0.25"},
                                                                          {"cached", "true"},
                                                                          {"big", "18446744073709551615"},
                                                                          {"small", "7"},
                                                                          {"literal", "text"}}));
  EXPECT_EQ(attribute(request, "user.id")->type, reader::SpanAttribute::Type::int64);
  EXPECT_EQ(attribute(request, "big")->type, reader::SpanAttribute::Type::uint64);
  EXPECT_EQ(attribute(request, "small")->type, reader::SpanAttribute::Type::int64) << "an integer is an int64";
  EXPECT_EQ(attribute(request, "ratio")->type, reader::SpanAttribute::Type::float64);
  EXPECT_EQ(attribute(request, "cached")->type, reader::SpanAttribute::Type::boolean);
  EXPECT_EQ(attribute(request, "literal")->type, reader::SpanAttribute::Type::string);
  EXPECT_TRUE(spans.find("server")->second.attributes.empty()) << "the enclosing span has none";
  EXPECT_TRUE(spans.find("inner")->second.attributes.empty()) << "the span inside has none";
  EXPECT_FALSE(request.failed);

  const auto dump = run(kCli + " dump " + config.output);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("http/request http.route=\"/quote\""), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("http/request user.id=42"), std::string::npos) << dump.out;
  EXPECT_EQ(dump.err.find("warning"), std::string::npos) << dump.err;

  const std::string database = directory / "trace.db";
  const auto sqlite = run(kCli + " export --format sqlite -o " + database + " " + config.output);
  ASSERT_EQ(sqlite.exit_code, 0) << sqlite.err;
  const auto rows = run("sqlite3 " + database +
                        " \"SELECT s.name, a.key, a.type, a.value FROM span_attributes a JOIN spans s USING (span) "
                        "ORDER BY a.key\"");
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(
      rows.out,
      "request|big|uint64|18446744073709551615\nrequest|cached|bool|1\nrequest|http.route|string|/quote\n"
      "request|literal|string|text\nrequest|ratio|double|0.25\nrequest|small|int64|7\nrequest|user.id|int64|42\n");

  // Chrome JSON: the span's B carries them as args, and its E the same (viewers match by them).
  const std::string chrome = directory / "trace.json";
  ASSERT_EQ(run(kCli + " export --format chrome -o " + chrome + " " + config.output).exit_code, 0);
  std::ifstream chrome_in(chrome);
  const nlohmann::json chrome_trace = nlohmann::json::parse(chrome_in);
  std::vector<nlohmann::json> request_args;
  for (const auto& event : chrome_trace["traceEvents"])
    if (event.value("name", "") == "request" && (event["ph"] == "B" || event["ph"] == "E"))
      request_args.push_back(event.value("args", nlohmann::json::object()));
  ASSERT_EQ(request_args.size(), 2u);
  EXPECT_EQ(request_args[0], request_args[1]);
  EXPECT_EQ(request_args[0]["http.route"], "/quote");
  EXPECT_EQ(request_args[0]["user.id"], 42);
  EXPECT_EQ(request_args[0]["cached"], true);
  EXPECT_EQ(request_args[0]["ratio"], 0.25);

  // babeltrace2 reads them as the metadata declares them.
  const auto babeltrace = run("babeltrace2 " + config.output);
  ASSERT_EQ(babeltrace.exit_code, 0) << babeltrace.err;
  EXPECT_EQ(babeltrace.err, "");
  EXPECT_NE(babeltrace.out.find("attribute_string:"), std::string::npos) << babeltrace.out;
  EXPECT_NE(babeltrace.out.find("value = \"/quote\""), std::string::npos) << babeltrace.out;
  EXPECT_NE(babeltrace.out.find("value = 18446744073709551615"), std::string::npos) << babeltrace.out;
  EXPECT_NE(babeltrace.out.find("value = 42"), std::string::npos) << babeltrace.out;
}

TEST(Attributes, ValuesAreComputedOnlyWhenTheCategoryIsRecorded) {
  g_evaluations = 0;
  { CHRONICLE_SPAN_ARGS("http", "request", "n", counted(1)); }
  CHRONICLE_INSTANT_ARGS("http", "tick", "n", counted(1));
  EXPECT_EQ(g_evaluations, 0) << "no session";
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.categories = "other";
  ASSERT_TRUE(start(config)) << last_error();
  {
    CHRONICLE_SPAN_ARGS("http", "request", "n", counted(1));
    CHRONICLE_SPAN_ATTRIBUTE("http", "later", counted(2));
  }
  CHRONICLE_INSTANT_ARGS("http", "tick", "n", counted(1));
  EXPECT_EQ(g_evaluations, 0) << "category off";
  stop();
  Config on = test_config(directory);
  on.output = directory / "on";
  ASSERT_TRUE(start(on)) << last_error();
  { CHRONICLE_SPAN_ARGS("http", "request", "n", counted(1)); }
  stop();
  EXPECT_EQ(g_evaluations, 1);
}

// What is known only later (an answer's status, a count) is set before the end, on the innermost
// open span of the thread.
TEST(Attributes, OneSetBeforeTheEndBelongsToTheInnermostOpenSpan) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    CHRONICLE_SPAN_ARGS("http", "request", "http.route", "/quote");
    {
      CHRONICLE_SPAN("db", "query");
      CHRONICLE_SPAN_ATTRIBUTE("db", "db.rows", 3);
    }
    const std::string user = "acme";
    CHRONICLE_SPAN_ATTRIBUTE("http", "user.id", user);
    CHRONICLE_SPAN_ATTRIBUTE("http", "http.response.status_code", 200);
  }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  ASSERT_EQ(spans.count("request"), 1u);
  ASSERT_EQ(spans.count("query"), 1u);
  EXPECT_EQ(attribute_texts(spans.find("request")->second),
            (std::map<std::string, std::string>{
                {"http.route", "/quote"}, {"user.id", "acme"}, {"http.response.status_code", "200"}}));
  EXPECT_EQ(attribute_texts(spans.find("query")->second), (std::map<std::string, std::string>{{"db.rows", "3"}}));
}

TEST(Attributes, ALongStringIsCutVisiblyAtACharacter) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  std::string long_text;
  while (long_text.size() < 1000) long_text += "é";  // two bytes each: a cut must not split one
  { CHRONICLE_SPAN_ARGS("db", "query", "db.statement", long_text); }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  ASSERT_EQ(spans.count("query"), 1u);
  const reader::SpanAttribute* statement = attribute(spans.find("query")->second, "db.statement");
  ASSERT_NE(statement, nullptr);
  EXPECT_LE(statement->text.size(), format::kMaxAttributeText);
  EXPECT_GT(statement->text.size(), format::kMaxAttributeText - 16);
  const std::string marker = format::kTruncatedMarker;
  ASSERT_GE(statement->text.size(), marker.size());
  EXPECT_EQ(statement->text.substr(statement->text.size() - marker.size()), marker);
  const std::string kept = statement->text.substr(0, statement->text.size() - marker.size());
  EXPECT_EQ(kept.size() % 2, 0u) << "cut inside a character";
  EXPECT_EQ(long_text.compare(0, kept.size(), kept), 0);
}

TEST(SpanStatus, FailCurrentSpanMarksTheInnermostOpenSpanOnly) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    CHRONICLE_SPAN("shop", "checkout");
    {
      CHRONICLE_SPAN("shop", "reserve stock");
      fail_current_span("no stock for item 7");
    }
    { CHRONICLE_SPAN("shop", "charge"); }
  }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  const reader::PairedSpan& reserve = spans.find("reserve stock")->second;
  EXPECT_TRUE(reserve.failed);
  EXPECT_EQ(reserve.status_message, "no stock for item 7");
  EXPECT_FALSE(spans.find("checkout")->second.failed);
  EXPECT_FALSE(spans.find("charge")->second.failed);

  const std::string output = directory / "otlp.json";
  const auto exported = run(kCli + " export --format otlp -o " + output + " " + config.output);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream in(output);
  const nlohmann::json request = nlohmann::json::parse(in);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"]) {
      EXPECT_EQ(scope["scope"]["name"], "shop") << "the category is the instrumentation scope";
      for (const auto& span : scope["spans"]) by_name[span["name"]] = span;
    }
  ASSERT_EQ(by_name.count("reserve stock"), 1u);
  EXPECT_EQ(by_name["reserve stock"]["status"]["code"], 2);
  EXPECT_EQ(by_name["reserve stock"]["status"]["message"], "no stock for item 7");
  EXPECT_FALSE(by_name["checkout"].contains("status"));
}

// A span begun and ended inside a destructor that unwinding runs: the exception passes by it.
struct CleansUpWithASpan {
  ~CleansUpWithASpan() { CHRONICLE_SPAN_ARGS("shop", "cleanup", "step", 1); }
};

void throws_inside_a_span() {
  CHRONICLE_SPAN("shop", "plain");
  CHRONICLE_SPAN_DYNAMIC("shop", std::string("named at run time"));
  CHRONICLE_SPAN_ARGS("shop", "parse", "input", "x=1");
  CleansUpWithASpan cleanup;
  throw std::runtime_error("bad input");
}

TEST(SpanStatus, AnExceptionLeavingTheScopeMarksTheSpanFailed) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    CHRONICLE_SPAN("shop", "handler");
    try {
      throws_inside_a_span();
    } catch (const std::exception&) {
      CHRONICLE_SPAN("shop", "recover");  // inside the handler: no exception is leaving it
    }
  }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  for (const char* name : {"plain", "named at run time", "parse"}) {
    ASSERT_TRUE(spans.contains(name)) << name;
    EXPECT_TRUE(spans.find(name)->second.failed) << name;
    EXPECT_EQ(spans.find(name)->second.status_message, "an exception left the span") << name;
  }
  EXPECT_FALSE(spans.find("cleanup")->second.failed) << "it began and ended while the exception passed by";
  EXPECT_FALSE(spans.find("recover")->second.failed);
  EXPECT_FALSE(spans.find("handler")->second.failed) << "the exception was caught inside it";
}

task<int> priced(thread_pool& pool, int customer) {
  CHRONICLE_SPAN_ARGS("shop", "price", "customer", customer);
  co_await pool.schedule();  // the span's task moves to the pool, its attributes stay its own
  { CHRONICLE_SPAN_ARGS("shop", "lookup", "customer", customer, "hit", customer % 2 == 0); }
  if (customer == 3) fail_current_span("customer 3 has no price list");
  co_return customer;
}

TEST(Attributes, ACoroutinesSpansKeepTheirAttributesAcrossThreads) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(2, "attributes-pool");
    for (int customer = 1; customer <= 4; ++customer) EXPECT_EQ(sync_wait(priced(pool, customer)), customer);
  }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  ASSERT_EQ(spans.count("price"), 4u);
  std::map<std::string, bool> failed_by_customer;
  for (auto [at, end] = spans.equal_range("price"); at != end; ++at)
    failed_by_customer[attribute_texts(at->second).at("customer")] = at->second.failed;
  EXPECT_EQ(failed_by_customer, (std::map<std::string, bool>{{"1", false}, {"2", false}, {"3", true}, {"4", false}}));
  for (auto [at, end] = spans.equal_range("lookup"); at != end; ++at) {
    const auto texts = attribute_texts(at->second);
    EXPECT_EQ(texts.at("hit"), std::stoi(texts.at("customer")) % 2 == 0 ? "true" : "false");
  }

  // Latency and errors per customer.
  const auto grouped = run(kCli + " stats --group-by customer --json " + config.output);
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
  const nlohmann::json groups = nlohmann::json::parse(grouped.out);
  std::map<std::string, std::pair<uint64_t, uint64_t>> price_groups;  // customer: count, errors
  for (const auto& group : groups)
    if (group["name"] == "price") price_groups[group["value"]] = {group["count"], group["errors"]};
  EXPECT_EQ(price_groups, (std::map<std::string, std::pair<uint64_t, uint64_t>>{
                              {"1", {1, 0}}, {"2", {1, 0}}, {"3", {1, 1}}, {"4", {1, 0}}}));
  const auto table = run(kCli + " stats --group-by customer " + config.output);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Spans by customer"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("shop/price"), std::string::npos) << table.out;
}

TEST(Attributes, AnInstantsArgsGoWithTheInstant) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    CHRONICLE_SPAN("cache", "get");
    CHRONICLE_INSTANT_ARGS("cache", "miss", "key", std::string_view("user:7"), "bytes", 512);
  }
  stop();
  reader::Trace trace(config.output);
  EXPECT_TRUE(spans_by_name(trace).find("get")->second.attributes.empty()) << "the instant's are not the span's";
  const auto dump = run(kCli + " dump " + config.output);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("cache/miss key=\"user:7\" (of the instant)"), std::string::npos) << dump.out;
  EXPECT_EQ(dump.err.find("warning"), std::string::npos) << dump.err;

  const std::string output = directory / "otlp.json";
  ASSERT_EQ(run(kCli + " export --format otlp -o " + output + " " + config.output).exit_code, 0);
  std::ifstream in(output);
  const nlohmann::json request = nlohmann::json::parse(in);
  bool found = false;
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) {
        if (span["name"] != "get") continue;
        ASSERT_EQ(span["events"].size(), 1u);
        std::map<std::string, nlohmann::json> attributes;
        for (const auto& attribute : span["events"][0]["attributes"]) attributes[attribute["key"]] = attribute["value"];
        EXPECT_EQ(attributes["key"], nlohmann::json({{"stringValue", "user:7"}}));
        EXPECT_EQ(attributes["bytes"], nlohmann::json({{"intValue", "512"}}));
        found = true;
      }
  EXPECT_TRUE(found);
}

task<int> tagged_task(int customer) {
  CHRONICLE_SPAN_ATTRIBUTE("shop", "customer", customer);  // no span open in the task: the task's own
  co_return customer;
}

// An attribute set in a coroutine that holds no span open belongs to its task: the task's OTLP
// span carries it, and no tool calls it an attribute without a span.
TEST(Attributes, OneSetInATaskWithNoSpanOpenIsTheTasksOwn) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_EQ(sync_wait(tagged_task(7)), 7);
  stop();
  const auto dump = run(kCli + " dump " + config.output);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(dump.err.find("warning"), std::string::npos) << dump.err;
  const std::string output = directory / "otlp.json";
  ASSERT_EQ(run(kCli + " export --format otlp -o " + output + " " + config.output).exit_code, 0);
  std::ifstream in(output);
  const nlohmann::json request = nlohmann::json::parse(in);
  std::vector<std::string> carriers;  // the functions of the tasks whose span has "customer"
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) {
        std::map<std::string, nlohmann::json> attributes;
        for (const auto& attribute : span["attributes"]) attributes[attribute["key"]] = attribute["value"];
        if (!attributes.contains("customer")) continue;
        EXPECT_EQ(attributes["customer"], nlohmann::json({{"intValue", "7"}}));
        carriers.push_back(attributes["chronicle.task.function"].value("stringValue", "(not a task)"));
      }
  ASSERT_EQ(carriers.size(), 1u);
  EXPECT_NE(carriers[0].find("tagged_task"), std::string::npos) << carriers[0];
}

// The names of the spans an OTLP export holds, with OTEL_TRACES_SAMPLER as given ("": unset).
std::multiset<std::string> exported_span_names(const std::string& trace, const std::string& sampler,
                                               const TemporaryDirectory& directory) {
  const std::string output = directory / ("sampled-" + (sampler.empty() ? std::string("unset") : sampler) + ".json");
  const std::string environment =
      sampler.empty() ? "env -u OTEL_TRACES_SAMPLER " : "OTEL_TRACES_SAMPLER=" + sampler + " ";
  const auto exported = run(environment + kCli + " export --format otlp -o " + output + " " + trace);
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream in(output);
  const nlohmann::json request = nlohmann::json::parse(in);
  std::multiset<std::string> names;
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) names.insert(span["name"].get<std::string>());
  return names;
}

// OpenTelemetry SDKs sample ParentBased by default: a request whose caller did not sample it
// (trace-flags 00) is not exported; recorded, it stays in the trace for chronicle's own tools.
TEST(OtelSampler, AnUnsampledRemoteParentsTraceIsNotExportedByDefault) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    ReceiveScope receive("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
    CHRONICLE_SPAN("rpc", "unsampled work");
  }
  {
    ReceiveScope receive("00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01");
    CHRONICLE_SPAN("rpc", "sampled work");
  }
  stop();
  const auto by_default = exported_span_names(config.output, "", directory);
  EXPECT_EQ(by_default.count("sampled work"), 1u);
  EXPECT_EQ(by_default.count("unsampled work"), 0u);
  EXPECT_EQ(by_default.count("receive"), 1u) << "the unsampled receive is not exported either";
  EXPECT_EQ(exported_span_names(config.output, "parentbased_always_on", directory), by_default);
  const auto always_on = exported_span_names(config.output, "always_on", directory);
  EXPECT_EQ(always_on.count("unsampled work"), 1u);
  EXPECT_EQ(always_on.count("receive"), 2u);
  const auto refused = run("OTEL_TRACES_SAMPLER=traceidratio " + kCli + " export --format otlp -o " +
                           (directory / "refused.json") + " " + config.output);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("OTEL_TRACES_SAMPLER=traceidratio"), std::string::npos) << refused.err;
}

// W3C tracestate: what a received message carried goes out as the traceState of every span of
// its trace (the receive's and its children's), as an OpenTelemetry SDK carries it on.
TEST(TraceState, AReceivedTracestateGoesOutWithEverySpanOfItsTrace) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    ReceiveScope receive("00-2af7651916cd43dd8448eb211c80319c-d7ad6b7169203331-01", "congo=t61rcWkgMzE,rojo=00f067aa");
    CHRONICLE_SPAN("rpc", "with state");
  }
  { CHRONICLE_SPAN("rpc", "without"); }
  stop();
  const std::string output = directory / "state.json";
  ASSERT_EQ(run(kCli + " export --format otlp -o " + output + " " + config.output).exit_code, 0);
  std::ifstream in(output);
  const nlohmann::json request = nlohmann::json::parse(in);
  std::map<std::string, std::string> state_by_name;
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) state_by_name[span["name"]] = span.value("traceState", "");
  EXPECT_EQ(state_by_name["receive"], "congo=t61rcWkgMzE,rojo=00f067aa");
  EXPECT_EQ(state_by_name["with state"], "congo=t61rcWkgMzE,rojo=00f067aa");
  EXPECT_EQ(state_by_name["without"], "");
  const auto dump = run(kCli + " dump " + config.output);
  EXPECT_NE(dump.out.find("tracestate=\"congo=t61rcWkgMzE,rojo=00f067aa\""), std::string::npos) << dump.out;
}

TEST(DynamicNames, ASpanIsNamedByItsRuntimeText) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  for (int round = 0; round < 2; ++round)
    for (const std::string customer : {"acme", "globex", "initech"}) {
      CHRONICLE_SPAN_DYNAMIC("tenant", "customer " + customer);
      CHRONICLE_SPAN_DYNAMIC("tenant", std::string_view("inside"));
    }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  EXPECT_EQ(spans.count("customer acme"), 2u);
  EXPECT_EQ(spans.count("customer globex"), 2u);
  EXPECT_EQ(spans.count("customer initech"), 2u);
  EXPECT_EQ(spans.count("inside"), 6u);
  for (auto [at, end] = spans.equal_range("inside"); at != end; ++at) EXPECT_EQ(at->second.depth, 1u);
  const auto stats = run(kCli + " stats " + config.output);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.err.find("warning"), std::string::npos) << stats.err;
}

// A call site tries the name it found last before it hashes the name: a name changed in place
// (one buffer, one length), or another name in that slot of the thread's table since (100 names
// of one length in 64 slots), is still named by its own text. Before the overflow test below:
// the table of names is the process's.
TEST(DynamicNames, ACallSiteGivenChangingNamesNamesEachSpanByItsOwnText) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  std::string name = "order 000";
  std::vector<std::string> given;
  for (int i = 0; i < 400; ++i) {
    const std::string digits = std::to_string(1000 + (i / 2 * 37) % 100).substr(1);  // each twice in a row
    name.replace(name.size() - 3, 3, digits);
    given.push_back(name);
    CHRONICLE_SPAN_DYNAMIC("tenant", name);
  }
  stop();
  reader::Trace trace(config.output);
  std::vector<std::string> named;
  for (const auto& event : test::read_all(trace))
    if (event.type == format::EventId::span_begin) named.push_back(trace.site(event.name_id)->name);
  EXPECT_EQ(named, given);
}

TEST(DynamicNames, PastTheTableNamesAreOverflowNeverMore) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  const size_t names = detail::kMaxDynamicNames + 5;
  for (size_t i = 0; i < names; ++i) {
    CHRONICLE_SPAN_DYNAMIC("tenant", "name " + std::to_string(i));
  }
  stop();
  reader::Trace trace(config.output);
  const auto spans = spans_by_name(trace);
  EXPECT_EQ(spans.size(), names) << "every span is there";
  // The table is the process's: other tests in this process may have named spans before.
  std::set<std::string> distinct;
  for (const auto& [name, span] : spans) distinct.insert(name);
  EXPECT_GE(spans.count(detail::kOverflowName), 5u);
  EXPECT_LE(distinct.size(), detail::kMaxDynamicNames + 1) << "the names kept, and <overflow>";
  EXPECT_EQ(spans.count("name 0"), 1u);
  EXPECT_EQ(spans.count("name " + std::to_string(names - 1)), 0u) << "the last names overflowed";
}

}  // namespace
}  // namespace chronicle
