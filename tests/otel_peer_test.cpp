// chronicle beside services it did not trace: tests/otlp/js_service.js, traced by the official
// OpenTelemetry JS SDK, and tests/otlp/py_service.py, traced by the official Python SDK, each with
// tests/programs/otel_peer_client.cpp, traced by chronicle, calling each other over HTTP with W3C
// traceparent headers. After `chronicle merge` of the program's trace with the service's
// OTLP/JSON spans, each request is one tree holding both sides, the service's spans keep their
// own ids and parents, and its clock (the same machine's, so the truth is an offset of 0) lies
// within the bound merge states, although the JS SDK's starts are whole milliseconds.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <thread>

#include "reader/trace_directory.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kClient = OTEL_PEER_CLIENT;
const std::string kOtlpDirectory = OTLP_CHECK_DIR;
constexpr int kRequests = 10;

using test::slurp;

// Waits, with a generous limit, for `path` to hold something.
bool wait_for_file(const std::string& path) {
  for (int i = 0; i < 600; ++i) {
    std::error_code error;
    if (std::filesystem::file_size(path, error) > 0 && !error) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct Spans {
  std::map<std::string, nlohmann::json> by_id;
};

Spans read_spans(const std::string& file) {
  Spans spans;
  const nlohmann::json document = nlohmann::json::parse(slurp(file));
  for (const auto& resource : document["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) spans.by_id[span["spanId"].get<std::string>()] = span;
  return spans;
}

// A service traced by an OpenTelemetry SDK: how it starts, and what its spans are named after.
struct Peer {
  std::string name;
  std::string sdk;       // a file the SDK's installation has (scripts/install-deps.sh)
  std::string start;     // the command, in OTLP_CHECK_DIR, before its arguments OUT PORT_FILE
  std::string host_dir;  // the service's trace in the merged directory
  bool whole_milliseconds;
};

std::ostream& operator<<(std::ostream& out, const Peer& peer) {
  return out << peer.name;
}

class OtelPeer : public ::testing::TestWithParam<Peer> {};

INSTANTIATE_TEST_SUITE_P(Sdks, OtelPeer,
                         ::testing::Values(Peer{"js", "node_modules/@opentelemetry/sdk-trace-base",
                                                "node js_service.js", "js-host-0-quotes-js", true},
                                           Peer{"python", "python/installed", "python/bin/python3 py_service.py",
                                                "py-host-0-quotes-py", false}),
                         [](const ::testing::TestParamInfo<Peer>& info) { return info.param.name; });

TEST_P(OtelPeer, EachRequestIsOneTreeWithTheServicesOwnSpansAlignedWithinTheBound) {
  const Peer& peer = GetParam();
  ASSERT_TRUE(std::filesystem::exists(kOtlpDirectory + "/" + peer.sdk))
      << "the OpenTelemetry " << peer.name << " SDK is not installed: run scripts/install-deps.sh";
  TemporaryDirectory directory;
  const std::string spans_file = directory / "service.json", port_file = directory / "port";
  ASSERT_EQ(run("cd " + kOtlpDirectory + " && " + peer.start + " " + spans_file + " " + port_file + " > " +
                (directory / "service.log") + " 2>&1 &")
                .exit_code,
            0);
  ASSERT_TRUE(wait_for_file(port_file)) << slurp(directory / "service.log");
  const int port = std::stoi(slurp(port_file));
  httplib::Client service("127.0.0.1", port);
  // The service leaves when told, on every path out of the test.
  struct Shutdown {
    httplib::Client& service;
    ~Shutdown() { service.Post("/shutdown"); }
  } shutdown_on_exit{service};
  const std::string program = directory / "program";
  const auto recorded = run(kCli + " record -q -o " + program + " -- " + kClient + " " + std::to_string(port) + " " +
                            std::to_string(kRequests));
  const auto bye = service.Post("/shutdown");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err << recorded.out;
  ASSERT_TRUE(bye && bye->status == 200) << slurp(directory / "service.log");
  ASSERT_TRUE(wait_for_file(spans_file));

  const std::string merged = directory / "merged";
  const auto merge = run(kCli + " merge " + program + " " + spans_file + " -o " + merged);
  ASSERT_EQ(merge.exit_code, 0) << merge.err << merge.out;
  EXPECT_EQ(merge.out.find("whole milliseconds") != std::string::npos, peer.whole_milliseconds) << merge.out;
  const std::string exported = directory / "merged.json";
  const auto exporting = run(kCli + " export --format otlp -o " + exported + " " + merged);
  ASSERT_EQ(exporting.exit_code, 0) << exporting.err;

  // The service's spans, as its SDK wrote them, are in the export with their ids and parents.
  const Spans theirs = read_spans(spans_file);
  const Spans all = read_spans(exported);
  ASSERT_EQ(theirs.by_id.size(), size_t{3 * kRequests});
  for (const auto& [id, span] : theirs.by_id) {
    SCOPED_TRACE(span["name"].get<std::string>() + " " + id);
    ASSERT_TRUE(all.by_id.count(id)) << "the service's span is not in the export under its own id";
    const nlohmann::json& out = all.by_id.at(id);
    EXPECT_EQ(out["traceId"], span["traceId"]);
    EXPECT_EQ(out.value("parentSpanId", ""), span.value("parentSpanId", ""));
    EXPECT_EQ(out["name"], span["name"]);
    EXPECT_EQ(out["kind"], span["kind"]);
  }

  // One tree per request: one root, "quote request", every parent in the same trace.
  std::map<std::string, std::vector<nlohmann::json>> traces;
  for (const auto& [id, span] : all.by_id) traces[span["traceId"].get<std::string>()].push_back(span);
  EXPECT_EQ(traces.size(), size_t{kRequests});
  for (const auto& [trace, spans] : traces) {
    SCOPED_TRACE(trace);
    std::set<std::string> ids, names;
    for (const auto& span : spans) {
      ids.insert(span["spanId"].get<std::string>());
      names.insert(span["name"].get<std::string>());
    }
    int roots = 0;
    for (const auto& span : spans) {
      const std::string parent = span.value("parentSpanId", "");
      if (parent.empty()) {
        ++roots;
        EXPECT_EQ(span["name"], "quote request");
      } else {
        EXPECT_TRUE(ids.count(parent)) << span["name"] << " has a parent outside its trace";
      }
    }
    EXPECT_EQ(roots, 1);
    EXPECT_EQ(names, (std::set<std::string>{"quote request", "send", "GET /quote", "price lookup", "POST /audit",
                                            "receive", "record audit"}));
  }

  // The truth is one clock: the service's correction is within its bound of 0.
  const reader::Trace service_trace(merged + "/" + peer.host_dir);
  ASSERT_TRUE(service_trace.description().correction) << merge.out;
  const auto& correction = *service_trace.description().correction;
  ASSERT_GE(correction.bound_ns, 0) << merge.out;
  EXPECT_LE(std::abs(correction.offset_ns), correction.bound_ns) << merge.out;
}

}  // namespace
}  // namespace chronicle
