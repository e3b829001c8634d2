// chronicle's spans in a real Jaeger, and OpenTelemetry's exporter environment: Jaeger v2 (tests/peers/jaeger: built
// from the Go module proxy by build.sh, which scripts/install-deps.sh runs; in-memory storage), started on loopback
// ports for the test. The quote service example is recorded with `record --otlp-endpoint`, and
// Jaeger's HTTP query API must then hold one trace per request, with everything the request
// started in it: what a user who sends chronicle's spans to the Jaeger they run sees.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <thread>

#include "support.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;

// A free loopback port now (the system's choice); Jaeger binds it a moment later.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

// Jaeger for one test: started by the constructor, stopped (SIGTERM, then waited for) by the
// destructor. `binary` empty: it is not built here, and ready() says why.
class Jaeger {
 public:
  Jaeger() {
    binary_ = run("bash " JAEGER_DIR "/build.sh --path").out;
    while (!binary_.empty() && binary_.back() == '\n') binary_.pop_back();
    if (binary_.empty() || access(binary_.c_str(), X_OK) != 0) {
      why_ = "no Jaeger at '" + binary_ + "': tests/peers/jaeger/build.sh builds it (scripts/install-deps.sh runs it)";
      return;
    }
    otlp_port_ = free_port();
    query_port_ = free_port();
    const int grpc_port = free_port();
    const std::string log = directory_ / "jaeger.log";
    pid_ = fork();
    if (pid_ == 0) {
      setenv("JAEGER_OTLP_HTTP", ("127.0.0.1:" + std::to_string(otlp_port_)).c_str(), 1);
      setenv("JAEGER_QUERY_HTTP", ("127.0.0.1:" + std::to_string(query_port_)).c_str(), 1);
      setenv("JAEGER_QUERY_GRPC", ("127.0.0.1:" + std::to_string(grpc_port)).c_str(), 1);
      if (!freopen(log.c_str(), "w", stdout) || !freopen(log.c_str(), "a", stderr)) _exit(126);
      execl(binary_.c_str(), binary_.c_str(), "--config", "file:" JAEGER_DIR "/config.yaml", nullptr);
      _exit(127);
    }
    // Ready once its query API answers (a generous limit: a loaded machine starts it slowly).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      if (get("/api/services").has_value()) return;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    why_ = "Jaeger did not start; its log: " + run("cat " + log).out;
  }
  ~Jaeger() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  Jaeger(const Jaeger&) = delete;
  Jaeger& operator=(const Jaeger&) = delete;

  const std::string& why_not_ready() const { return why_; }
  std::string otlp_endpoint() const { return "http://127.0.0.1:" + std::to_string(otlp_port_); }
  std::optional<nlohmann::json> get(const std::string& path) const {
    httplib::Client client("127.0.0.1", query_port_);
    client.set_connection_timeout(2);
    const auto response = client.Get(path);
    if (!response || response->status != 200) return std::nullopt;
    return nlohmann::json::parse(response->body, nullptr, false);
  }

 private:
  TemporaryDirectory directory_;
  std::string binary_, why_;
  int otlp_port_ = 0, query_port_ = 0;
  pid_t pid_ = -1;
};

// Each trace Jaeger holds for `service`: span names, the request spans ("request N") in it, and
// its roots (the spans that reference no parent).
struct JaegerTrace {
  std::multiset<std::string> names;
  std::vector<std::string> requests;
  std::vector<std::string> roots;
};
std::vector<JaegerTrace> traces_of(const nlohmann::json& answer) {
  std::vector<JaegerTrace> traces;
  for (const auto& trace : answer["data"]) {
    JaegerTrace& out = traces.emplace_back();
    for (const auto& span : trace["spans"]) {
      const std::string name = span["operationName"];
      out.names.insert(name);
      if (name.starts_with("request ")) out.requests.push_back(name);
      const auto references = span.find("references");
      if (references == span.end() || references->empty()) out.roots.push_back(name);
    }
  }
  return traces;
}

TEST(Jaeger, TheQuoteServicePushedLiveIsOneTracePerRequestWithEverythingItStarted) {
  const Jaeger jaeger;
  if (!jaeger.why_not_ready().empty()) GTEST_SKIP() << jaeger.why_not_ready();
  TemporaryDirectory directory;
  const auto recorded = run(kCli + " record -q --otlp-endpoint " + jaeger.otlp_endpoint() + " -o " +
                            (directory / "trace") + " -- " + QUOTE_EXAMPLE + " 40 4");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  // Jaeger stores what it received asynchronously: wait for the 40 requests, generously.
  std::vector<JaegerTrace> traces;
  size_t requests = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    if (const auto answer = jaeger.get("/api/traces?service=quote_example&limit=10000")) {
      traces = traces_of(*answer);
      requests = 0;
      for (const JaegerTrace& trace : traces) requests += trace.requests.size();
      if (requests >= 40) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(requests, 40u);
  // What each request started, under it in its trace: the client's request span (the root, on a
  // thread with no context), its send and the server's receive of its traceparent, the server's
  // tasks and spans, the reply's write, its hops onto the pool and its price call's sleep.
  const std::multiset<std::string> per_request = {"quote request",
                                                  "send",
                                                  "receive",
                                                  "handle request",
                                                  "quote",
                                                  "chronicle::when_all",
                                                  "load_user",
                                                  "user cache",
                                                  "wait for user cache lock",
                                                  "chronicle::with_timeout",
                                                  "load_price_list",
                                                  "pricing call",
                                                  "timeout",
                                                  "check_stock",
                                                  "stock call",
                                                  "audit record",
                                                  "socket.async_send in async_write",
                                                  "thread_pool.schedule",
                                                  "thread_pool.schedule",
                                                  "thread_pool.schedule",
                                                  "thread_pool.sleep_for"};
  size_t request_traces = 0;
  for (const JaegerTrace& trace : traces) {
    if (trace.requests.empty()) continue;
    ++request_traces;
    ASSERT_EQ(trace.requests.size(), 1u) << "two requests in one trace";
    std::multiset<std::string> names = trace.names;
    names.erase(trace.requests.front());
    EXPECT_EQ(names, per_request) << trace.requests.front();
    EXPECT_EQ(trace.roots, std::vector<std::string>{"quote request"}) << "one tree: " << trace.requests.front();
  }
  EXPECT_EQ(request_traces, 40u);
}

// A service traced by the official OpenTelemetry Python or JS SDK (tests/otlp/py_service.py,
// js_service.js, exporting with the SDK's own OTLP/HTTP exporter) and a chronicle-traced program
// (`record --otlp-endpoint`) call each other, both pushing to one Jaeger: each request is one trace there,
// both services' spans in it, the program's request its only root, the service's SERVER span
// under the program's send, and the service's attributes kept.
struct OtelService {
  std::string sdk;    // a file of the SDK's installation (scripts/install-deps.sh)
  std::string start;  // the command in tests/otlp, before its arguments OUT PORT_FILE
  std::string name;   // its service.name
};

std::ostream& operator<<(std::ostream& out, const OtelService& service) {
  return out << service.name;
}

class JaegerWithAService : public ::testing::TestWithParam<OtelService> {};

INSTANTIATE_TEST_SUITE_P(Sdks, JaegerWithAService,
                         ::testing::Values(OtelService{"python/installed", "python/bin/python3 py_service.py",
                                                       "quotes-py"},
                                           OtelService{"node_modules/@opentelemetry/exporter-trace-otlp-http",
                                                       "node js_service.js", "quotes-js"}),
                         [](const ::testing::TestParamInfo<OtelService>& info) {
                           return info.param.name == "quotes-py" ? std::string("python") : std::string("js");
                         });

TEST_P(JaegerWithAService, ItsSpansAndAChronicleProgramsShareOneTreePerRequest) {
  const OtelService& peer = GetParam();
  const Jaeger jaeger;
  if (!jaeger.why_not_ready().empty()) GTEST_SKIP() << jaeger.why_not_ready();
  ASSERT_TRUE(std::filesystem::exists(std::string(OTLP_CHECK_DIR) + "/" + peer.sdk))
      << "the OpenTelemetry SDK of " << peer.name << " is not installed: run scripts/install-deps.sh";
  TemporaryDirectory directory;
  const std::string port_file = directory / "port", log = directory / "service.log";
  ASSERT_EQ(run(std::string("cd ") + OTLP_CHECK_DIR + " && OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.otlp_endpoint() +
                " " + peer.start + " " + (directory / "spans.json") + " " + port_file + " > " + log + " 2>&1 &")
                .exit_code,
            0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(port_file) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(std::filesystem::exists(port_file)) << run("cat " + log).out;
  const int port = std::stoi(run("cat " + port_file).out);
  httplib::Client service("127.0.0.1", port);
  struct Shutdown {  // the service leaves on every path out of the test
    httplib::Client& service;
    ~Shutdown() { service.Post("/shutdown"); }
  } shutdown_on_exit{service};
  constexpr size_t kRequests = 10;
  const auto recorded =
      run(kCli + " record -q --otlp-endpoint " + jaeger.otlp_endpoint() + " -o " + (directory / "trace") + " -- " +
          OTEL_PEER_CLIENT + " " + std::to_string(port) + " " + std::to_string(kRequests));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err << recorded.out;

  const std::multiset<std::string> per_request = {"quote request", "send",    "GET /quote",  "price lookup",
                                                  "POST /audit",   "receive", "record audit"};
  nlohmann::json answer;
  size_t whole = 0;
  while (std::chrono::steady_clock::now() < until + std::chrono::seconds(60) && whole < kRequests) {
    if (const auto got = jaeger.get("/api/traces?service=otel_peer_client&limit=10000")) {
      answer = *got;
      whole = 0;
      for (const JaegerTrace& trace : traces_of(answer)) whole += trace.names == per_request;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const std::vector<JaegerTrace> traces = traces_of(answer);
  ASSERT_EQ(traces.size(), kRequests);
  for (const JaegerTrace& trace : traces) {
    EXPECT_EQ(trace.names, per_request);
    EXPECT_EQ(trace.roots, std::vector<std::string>{"quote request"}) << "one tree per request";
  }
  for (const auto& trace : answer["data"]) {
    std::map<std::string, nlohmann::json> by_name;
    std::set<std::string> services;
    for (const auto& span : trace["spans"]) {
      by_name[span["operationName"]] = span;
      services.insert(trace["processes"][span["processID"].get<std::string>()]["serviceName"].get<std::string>());
    }
    EXPECT_EQ(services, (std::set<std::string>{"otel_peer_client", peer.name}));
    const auto& server = by_name["GET /quote"];
    ASSERT_FALSE(server["references"].empty());
    EXPECT_EQ(server["references"][0]["spanID"], by_name["send"]["spanID"]) << "the server under the client's send";
    std::map<std::string, std::string> tags;
    for (const auto& tag : by_name["price lookup"]["tags"]) tags[tag["key"]] = tag["value"].dump();
    EXPECT_EQ(tags["price.currency"], "\"EUR\"");
  }
}

// OpenTelemetry's exporter environment, as an SRE sets it for every service: `record --otlp`
// pushes where OTEL_EXPORTER_OTLP_ENDPOINT says, gzip-compressed when _COMPRESSION says so, and
// Jaeger takes it (it decompresses what it receives: a wrong encoding would lose every span).
TEST(Jaeger, RecordPushesWhereTheOtelEnvironmentSaysGzipCompressed) {
  const Jaeger jaeger;
  if (!jaeger.why_not_ready().empty()) GTEST_SKIP() << jaeger.why_not_ready();
  TemporaryDirectory directory;
  const auto recorded =
      run("OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.otlp_endpoint() + " OTEL_EXPORTER_OTLP_COMPRESSION=gzip " + kCli +
          " record -q --otlp -o " + (directory / "trace") + " -- " + QUOTE_EXAMPLE + " 10 2");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  size_t requests = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until && requests < 10) {
    if (const auto answer = jaeger.get("/api/traces?service=quote_example&limit=10000")) {
      requests = 0;
      for (const JaegerTrace& trace : traces_of(*answer)) requests += trace.requests.size();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(requests, 10u);
}

// The rest of the environment, seen by a collector of our own: the signal's endpoint is the
// whole URL (no /v1/traces added), its headers are sent (percent-decoded), gzip says so, and a
// setting the command line gives wins over the environment's.
TEST(OtelEnvironment, TheTracesEndpointHeadersAndCompressionAreTheEnvironments) {
  httplib::Server collector;
  std::mutex mutex;
  std::vector<std::map<std::string, std::string>> requests;
  collector.Post(".*", [&](const httplib::Request& request, httplib::Response& response) {
    std::lock_guard lock(mutex);
    requests.push_back({{"path", request.path},
                        {"encoding", request.get_header_value("Content-Encoding")},
                        {"type", request.get_header_value("Content-Type")},
                        {"tenant", request.get_header_value("X-Tenant")},
                        {"authorization", request.get_header_value("Authorization")},
                        {"body", request.body.empty() ? "empty" : "bytes"}});
    response.status = 200;
  });
  const int port = collector.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { collector.listen_after_bind(); });
  TemporaryDirectory directory;
  const auto recorded = run(kCli + " record -q -o " + (directory / "trace") + " -- " + QUOTE_EXAMPLE + " 4 1");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  const std::string environment = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:" + std::to_string(port) +
                                  "/ingest/traces OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 "
                                  "OTEL_EXPORTER_OTLP_HEADERS='X-Tenant=team%20a, Authorization=Bearer%20t0k3n' "
                                  "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=gzip OTEL_EXPORTER_OTLP_PROTOCOL=http/json ";
  const auto pushed = run(environment + kCli + " export --otlp --otlp-protocol http/protobuf " + (directory / "trace"));
  collector.stop();
  serving.join();
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err;
  ASSERT_FALSE(requests.empty());
  for (const auto& request : requests) {
    EXPECT_EQ(request.at("path"), "/ingest/traces");
    EXPECT_EQ(request.at("encoding"), "gzip");
    EXPECT_EQ(request.at("type"), "application/x-protobuf") << "--otlp-protocol wins over the environment";
    EXPECT_EQ(request.at("tenant"), "team a");
    EXPECT_EQ(request.at("authorization"), "Bearer t0k3n");
    EXPECT_EQ(request.at("body"), "bytes");
  }
  // No endpoint anywhere: --otlp says which variables it looked for.
  const auto nowhere = run("env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT " + kCli +
                           " export --otlp " + (directory / "trace"));
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_NE(nowhere.err.find("OTEL_EXPORTER_OTLP_ENDPOINT"), std::string::npos) << nowhere.err;
  const auto grpc = run("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 OTEL_EXPORTER_OTLP_PROTOCOL=grpc " + kCli +
                        " export --otlp " + (directory / "trace"));
  EXPECT_EQ(grpc.exit_code, 2);
  EXPECT_NE(grpc.err.find("grpc"), std::string::npos) << grpc.err;
}

}  // namespace
}  // namespace chronicle
