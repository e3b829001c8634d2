// `chronicle export --otlp-endpoint`: a recorded trace pushed over OTLP/HTTP (protobuf and
// JSON) to a local receiver (tests/otlp/receiver.js) that decodes every request with the
// official OpenTelemetry definitions and logs the spans it got. The spans received are compared
// with the trace's OTLP/JSON file export: the same span ids, each exactly once. Also: a receiver
// that refuses, one that exits in the middle and is restarted, a collector that is down (the
// spool, then the resend), and a partial success.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "export/otlp_live.hpp"
#include "export/otlp_push.hpp"
#include "format/trace_writer.hpp"
#include "reader/trace_directory.hpp"
#include "support.hpp"

extern char** environ;

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;
using namespace std::chrono_literals;

const std::string kCli = CHRONICLE_CLI;
const std::string kEchoExample = ECHO_EXAMPLE;
const std::string kCoroutinesExample = COROUTINES_EXAMPLE;
const std::string kOtlpDirectory = OTLP_CHECK_DIR;
const std::string kLiveSpans = LIVE_SPANS;

// Waits for `done` with a generous limit; false when it never came.
template <typename Condition>
bool wait_for(Condition done, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// A child process, its output in files; killed when still running at destruction.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& output) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Process() {
    if (pid_ > 0 && !exit_code_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Its exit code once it has exited (128 + signal when killed), else nothing.
  std::optional<int> exit_code() {
    if (!exit_code_ && pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_)
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return exit_code_;
  }
  std::optional<int> wait(std::chrono::seconds limit = 120s) {
    wait_for([&] { return exit_code().has_value(); }, limit);
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

using test::slurp;

// The receiver process, logging to LOG; `port` 0 takes an ephemeral one.
class Receiver {
 public:
  Receiver(const TemporaryDirectory& scratch, const std::string& log, const std::vector<std::string>& options,
           int port = 0)
      : port_file_(scratch / ("port-" + std::to_string(++count_))), output_(port_file_ + ".out") {
    std::vector<std::string> argv = {
        "node",    kOtlpDirectory + "/receiver.js", "--log", log, "--port", std::to_string(port), "--port-file",
        port_file_};
    argv.insert(argv.end(), options.begin(), options.end());
    process_ = std::make_unique<Process>(argv, output_);
  }
  // Waits until it listens; its port, or 0 when it never did.
  int port() {
    if (!wait_for([&] { return std::filesystem::exists(port_file_) || process_->exit_code().has_value(); })) return 0;
    return std::filesystem::exists(port_file_) ? std::stoi(slurp(port_file_)) : 0;
  }
  std::string output() const { return slurp(output_); }
  Process& process() { return *process_; }

 private:
  static inline int count_ = 0;
  std::string port_file_;
  std::string output_;
  std::unique_ptr<Process> process_;
};

std::string endpoint(int port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

// What the receiver logged: the spans of the requests it accepted (span id -> span, with the
// number of times each id came), and the statuses it answered.
struct Received {
  std::map<std::string, nlohmann::json> spans;
  std::map<std::string, int> times;
  std::vector<int> statuses;
  std::vector<int64_t> times_ms;
  std::vector<std::string> protocols;
  std::vector<std::string> errors;
  size_t total_spans() const {
    size_t total = 0;
    for (const auto& [id, n] : times) total += n;
    return total;
  }
};

Received read_log(const std::string& log) {
  Received received;
  // The receiver may be writing its last line while a test waits on the log: only whole lines
  // (ended by a newline) are read.
  const std::string text = slurp(log);
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const auto entry = nlohmann::json::parse(text.substr(start, end - start));
    received.statuses.push_back(entry["status"].get<int>());
    received.times_ms.push_back(entry["time"].get<int64_t>());
    if (entry.contains("error")) received.errors.push_back(entry["error"].get<std::string>());
    if (entry["status"] != 200) continue;
    received.protocols.push_back(entry["protocol"].get<std::string>());
    for (const auto& item : entry["spans"]) {
      const std::string id = item["span"]["spanId"].get<std::string>();
      received.spans[id] = item;
      ++received.times[id];
    }
  }
  return received;
}

// The span ids of an OTLP/JSON file, sorted.
std::vector<std::string> span_ids_in(const std::string& file) {
  std::vector<std::string> ids;
  const auto request = nlohmann::json::parse(slurp(file));
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"]) ids.push_back(span["spanId"].get<std::string>());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The span ids of the trace's OTLP/JSON file export, sorted.
std::vector<std::string> exported_span_ids(const std::string& trace, const TemporaryDirectory& scratch) {
  const std::string file = scratch / "export.otlp.json";
  const auto result = run(kCli + " export " + trace + " --format otlp --force -o " + file);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return span_ids_in(file);
}

// What names a span and places it in its trace, from the trace's OTLP/JSON file export: span
// id -> "trace id / parent id / name".
std::map<std::string, std::string> exported_identities(const std::string& trace, const TemporaryDirectory& scratch) {
  const std::string file = scratch / "identities.otlp.json";
  const auto result = run(kCli + " export " + trace + " --format otlp --force -o " + file);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::map<std::string, std::string> identities;
  const auto request = nlohmann::json::parse(slurp(file));
  for (const auto& resource : request["resourceSpans"])
    for (const auto& scope : resource["scopeSpans"])
      for (const auto& span : scope["spans"])
        identities[span["spanId"].get<std::string>()] = span["traceId"].get<std::string>() + " / " +
                                                        span.value("parentSpanId", std::string()) + " / " +
                                                        span["name"].get<std::string>();
  return identities;
}

std::map<std::string, std::string> identities_of(const Received& received) {
  std::map<std::string, std::string> identities;
  for (const auto& [id, item] : received.spans) {
    const auto& span = item["span"];
    identities[id] = span["traceId"].get<std::string>() + " / " + span.value("parentSpanId", std::string()) + " / " +
                     span["name"].get<std::string>();
  }
  return identities;
}

std::vector<std::string> ids_of(const Received& received) {
  std::vector<std::string> ids;
  for (const auto& [id, n] : received.times) ids.insert(ids.end(), n, id);
  return ids;
}

class OtlpPush : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    auto result = run(kCli + " record -q -o " + (*directory_ / "echo") + " -- " + kEchoExample + " 3 20");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    // Two processes of one record run, one with tasks that wait on others (span links).
    result = run(kCli + " record -q -o " + (*directory_ / "two") + " -- sh -c '" + kEchoExample + " 2 5 && " +
                 kCoroutinesExample + " >/dev/null'");
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kOtlpDirectory + "/node_modules/@opentelemetry/otlp-transformer"))
        << "the OTLP definitions are not installed: run scripts/install-deps.sh (npm ci in tests/otlp)";
  }
  static std::string echo_trace() { return *directory_ / "echo"; }
  static std::string two_processes() { return *directory_ / "two"; }
  std::string push_command(int port, const std::string& trace, const std::string& options) const {
    return kCli + " export " + trace + " --otlp-endpoint " + endpoint(port) + " --otlp-spool " + (scratch_ / "spool") +
           " " + options;
  }

  TemporaryDirectory scratch_;
  std::string log_ = scratch_ / "received.ndjson";
  static inline TemporaryDirectory* directory_ = nullptr;
};

// Pushes `trace` in `protocol` in small batches and checks every exported span arrived once.
Received push_and_compare(const std::string& trace, const std::string& protocol, const TemporaryDirectory& scratch,
                          const std::string& log) {
  Receiver receiver(scratch, log, {});
  const int port = receiver.port();
  EXPECT_NE(port, 0) << receiver.output();
  const auto result = run(kCli + " export " + trace + " --otlp-endpoint " + endpoint(port) + " --otlp-protocol " +
                          protocol + " --otlp-batch-spans 7");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("chronicle: sent "), std::string::npos) << result.err;
  const Received received = read_log(log);
  EXPECT_TRUE(received.errors.empty()) << received.errors.front();
  const auto expected = exported_span_ids(trace, scratch);
  EXPECT_GT(expected.size(), 14u) << "the trace is too small to need several requests";
  EXPECT_EQ(ids_of(received), expected);
  EXPECT_EQ(received.protocols.size(), (expected.size() + 6) / 7);
  for (const std::string& used : received.protocols) EXPECT_EQ(used, protocol == "http/json" ? "json" : "protobuf");
  return received;
}

TEST_F(OtlpPush, EverySpanArrivesOnceInProtobuf) {
  push_and_compare(echo_trace(), "http/protobuf", scratch_, log_);
}

TEST_F(OtlpPush, EverySpanArrivesOnceInJson) {
  push_and_compare(echo_trace(), "http/json", scratch_, log_);
}

TEST_F(OtlpPush, EveryProcessOfARecordRunArrives) {
  const Received received = push_and_compare(two_processes(), "http/protobuf", scratch_, log_);
  std::set<std::string> services;
  for (const auto& [id, item] : received.spans) services.insert(item["service"].get<std::string>());
  EXPECT_EQ(services.size(), 2u);
}

// Other services' spans merged from OTLP input are theirs to export (they did): a push of the
// merged trace sends chronicle's own spans and says it left the others out, unless asked.
TEST_F(OtlpPush, AMergedTraceSendsOnlyItsOwnSpansUnlessAsked) {
  const std::string other = scratch_ / "other-services.otlp.json";  // two services, as OTLP/JSON
  auto result = run(kCli + " export " + two_processes() + " --format otlp -o " + other);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string merged = scratch_ / "merged";
  result = run(kCli + " merge " + echo_trace() + " " + other + " -o " + merged);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto others = span_ids_in(other);
  const auto everything = exported_span_ids(merged, scratch_);
  ASSERT_FALSE(others.empty());
  std::vector<std::string> own;
  std::set_difference(everything.begin(), everything.end(), others.begin(), others.end(), std::back_inserter(own));
  ASSERT_EQ(own.size() + others.size(), everything.size()) << "the merged trace holds every span of its inputs";

  Receiver receiver(scratch_, log_, {});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  result = run(kCli + " export " + merged + " --otlp-endpoint " + endpoint(port));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("not sending the spans of 2 services merged from OTLP input"), std::string::npos)
      << result.err;
  EXPECT_EQ(ids_of(read_log(log_)), own);

  const std::string log_with_others = scratch_ / "with-others.ndjson";
  Receiver asked(scratch_, log_with_others, {});
  result =
      run(kCli + " export " + merged + " --otlp-endpoint " + endpoint(asked.port()) + " --otlp-include-merged-input");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ids_of(read_log(log_with_others)), everything) << "each span once, under the id its service gave it";
}

// The protobuf encoder says what the JSON one says: decoded by the official definitions, each
// span is the same in both, field by field.
TEST_F(OtlpPush, ProtobufAndJsonCarryTheSameSpans) {
  const Received protobuf = push_and_compare(two_processes(), "http/protobuf", scratch_, scratch_ / "protobuf.ndjson");
  const Received json = push_and_compare(two_processes(), "http/json", scratch_, scratch_ / "json.ndjson");
  ASSERT_EQ(protobuf.spans.size(), json.spans.size());
  size_t with_events = 0, with_links = 0, with_parents = 0, with_status = 0;
  for (const auto& [id, item] : protobuf.spans) {
    ASSERT_TRUE(json.spans.count(id)) << id;
    ASSERT_EQ(item, json.spans.at(id)) << id;
    with_events += item["span"].contains("events");
    with_links += item["span"].contains("links");
    with_parents += item["span"].contains("parentSpanId");
    with_status += item["span"].contains("status");
  }
  EXPECT_GT(with_events, 0u);
  EXPECT_GT(with_links, 0u);
  EXPECT_GT(with_parents, 0u);
  EXPECT_GT(with_status, 0u);
}

TEST_F(OtlpPush, RefusalsAreRetriedAfterRetryAfter) {
  Receiver receiver(scratch_, log_, {"--fail-first", "2", "--retry-after", "1"});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  const auto result = run(push_command(port, echo_trace(), "--otlp-batch-spans 50"));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("(2 retries)"), std::string::npos) << result.err;
  const Received received = read_log(log_);
  ASSERT_GE(received.statuses.size(), 3u);
  EXPECT_EQ(received.statuses[0], 503);
  EXPECT_EQ(received.statuses[1], 503);
  EXPECT_EQ(received.statuses[2], 200);
  // Retry-After: 1 was honoured: no retry came sooner (a lower bound, not a timing assertion).
  EXPECT_GE(received.times_ms[1] - received.times_ms[0], 1000);
  EXPECT_GE(received.times_ms[2] - received.times_ms[1], 1000);
  EXPECT_EQ(ids_of(received), exported_span_ids(echo_trace(), scratch_));
}

// The receiver exits after 3 requests and another starts on its port: the push goes on through
// the connection errors in between. A request is answered before the receiver exits, so no batch
// is sent twice: spans received = spans sent, each once.
TEST_F(OtlpPush, AReceiverThatRestartsInTheMiddleGetsEverySpanOnce) {
  auto first = std::make_unique<Receiver>(scratch_, log_, std::vector<std::string>{"--exit-after", "3"});
  const int port = first->port();
  ASSERT_NE(port, 0) << first->output();
  Process push({kCli, "export", echo_trace(), "--otlp-endpoint", endpoint(port), "--otlp-batch-spans", "5",
                "--otlp-retry-seconds", "120", "--otlp-spool", scratch_ / "spool"},
               scratch_ / "push.out");
  ASSERT_TRUE(push.started());
  ASSERT_EQ(first->process().wait(), 0) << first->output();
  ASSERT_FALSE(push.exit_code().has_value())
      << "the push ended with the first receiver: " << slurp(scratch_ / "push.out");
  Receiver second(scratch_, log_, {}, port);
  ASSERT_EQ(second.port(), port) << second.output();
  ASSERT_EQ(push.wait(), 0) << slurp(scratch_ / "push.out");
  const Received received = read_log(log_);
  EXPECT_TRUE(received.errors.empty());
  EXPECT_GT(received.protocols.size(), 3u) << "the second receiver got nothing";
  EXPECT_EQ(ids_of(received), exported_span_ids(echo_trace(), scratch_));
  EXPECT_FALSE(std::filesystem::exists(scratch_ / "spool"));
}

// A port nobody listens on: what a collector that is down looks like.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

TEST_F(OtlpPush, ACollectorThatIsDownGetsTheSpooledBatchesLater) {
  const auto expected = exported_span_ids(echo_trace(), scratch_);
  const std::string spool = scratch_ / "spool";
  const int down = closed_port();
  // Under umask 022: the spool holds the trace's spans, as private as the trace (0700, 0600).
  auto result = run("umask 022; " + push_command(down, echo_trace(), "--otlp-batch-spans 6 --otlp-retry-seconds 0.3"));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(std::filesystem::status(spool).permissions(), std::filesystem::perms::owner_all) << spool;
  for (const auto& entry : std::filesystem::directory_iterator(spool))
    EXPECT_EQ(entry.status().permissions(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << entry.path();
  EXPECT_NE(result.err.find(fmt::format("0 of {} spans sent in 0 requests, {} spooled in {} files in {}",
                                        expected.size(), expected.size(), (expected.size() + 5) / 6, spool)),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("--otlp-resend " + spool), std::string::npos) << result.err;
  size_t spooled_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(spool)) spooled_files += entry.is_regular_file();
  EXPECT_EQ(spooled_files, (expected.size() + 5) / 6);

  // Still down: the resend keeps every file.
  result =
      run(kCli + " export --otlp-endpoint " + endpoint(down) + " --otlp-resend " + spool + " --otlp-retry-seconds 0.2");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find(fmt::format("{} spooled", expected.size())), std::string::npos) << result.err;

  Receiver receiver(scratch_, log_, {});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  result = run(kCli + " export --otlp-endpoint " + endpoint(port) + " --otlp-resend " + spool);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ids_of(read_log(log_)), expected);
  EXPECT_TRUE(std::filesystem::is_empty(spool));
}

TEST_F(OtlpPush, SpansTheCollectorRejectsAreReported) {
  Receiver receiver(scratch_, log_, {"--reject-spans", "2"});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  for (const char* protocol : {"http/protobuf", "http/json"}) {
    const auto result = run(push_command(port, echo_trace(), std::string("--otlp-protocol ") + protocol));
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_NE(result.err.find("2 rejected by the collector"), std::string::npos) << protocol << ": " << result.err;
  }
}

// A collector that takes a request and crashes before answering: the client cannot tell it from
// one that never got it, and sends it again. Delivery is at least once: that batch's spans
// arrive twice (same span ids), every other span once, none is missing.
TEST_F(OtlpPush, ARequestWhoseAnswerIsLostIsSentAgain) {
  Receiver receiver(scratch_, log_, {"--drop-request", "2"});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  const auto result = run(push_command(port, echo_trace(), "--otlp-batch-spans 20"));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("(1 retry)"), std::string::npos) << result.err;
  const Received received = read_log(log_);
  const auto expected = exported_span_ids(echo_trace(), scratch_);
  std::vector<std::string> unique;
  size_t twice = 0;
  for (const auto& [id, times] : received.times) {
    unique.push_back(id);
    EXPECT_LE(times, 2) << id;
    twice += times == 2;
  }
  EXPECT_EQ(unique, expected);
  EXPECT_EQ(twice, 20u);
  EXPECT_EQ(received.total_spans(), expected.size() + 20);
}

// A request the collector refuses outright (400) is not retried but spooled, and the push goes
// on with the next ones; the resend delivers it.
TEST_F(OtlpPush, ARefusedRequestIsSpooledAndTheRestIsSent) {
  Receiver receiver(scratch_, log_, {"--fail-first", "1", "--fail-status", "400"});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  const auto expected = exported_span_ids(echo_trace(), scratch_);
  auto result = run(push_command(port, echo_trace(), "--otlp-batch-spans 50"));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("HTTP 400"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(fmt::format("{} of {} spans sent", expected.size() - 50, expected.size())),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("50 spooled in 1 file in"), std::string::npos) << result.err;
  EXPECT_EQ(read_log(log_).total_spans(), expected.size() - 50);
  result = run(kCli + " export --otlp-endpoint " + endpoint(port) + " --otlp-resend " + (scratch_ / "spool"));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ids_of(read_log(log_)), expected);
}

TEST(OtlpEndpoint, TracesGoToV1TracesUnlessTheUrlSaysIt) {
  EXPECT_EQ(exports::otlp_traces_url("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/traces");
  EXPECT_EQ(exports::otlp_traces_url("http://collector:4318/"), "http://collector:4318/v1/traces");
  EXPECT_EQ(exports::otlp_traces_url("http://gw/otlp"), "http://gw/otlp/v1/traces");
  EXPECT_EQ(exports::otlp_traces_url("http://gw/otlp/v1/traces"), "http://gw/otlp/v1/traces");
  EXPECT_THROW(exports::otlp_traces_url("https://gw:4318"), std::invalid_argument);
  EXPECT_THROW(exports::otlp_traces_url("gw:4318"), std::invalid_argument);
  EXPECT_THROW(exports::otlp_traces_url("http://"), std::invalid_argument);
}

// A collector that reads each request and trickles its answer a byte a second (a header that
// never ends), for a minute at most: an HTTP client's per-read timeout never fires.
class TricklingCollector {
 public:
  TricklingCollector() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) == 0 && ::listen(listener_, 16) == 0 &&
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0)
      port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TricklingCollector() {
    stopping_ = true;
    thread_.join();
    ::close(listener_);
  }
  TricklingCollector(const TricklingCollector&) = delete;
  TricklingCollector& operator=(const TricklingCollector&) = delete;

  int port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void serve() {
    const std::string answer = "HTTP/1.1 200 OK\r\nX-Slow: " + std::string(200, 'a');
    struct Client {
      int fd;
      size_t sent = 0;
      bool asked = false;
    };
    std::vector<Client> clients;
    const auto start = std::chrono::steady_clock::now();
    auto next_byte = start;
    while (!stopping_ && std::chrono::steady_clock::now() - start < 60s) {
      if (const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); fd >= 0)
        clients.push_back(Client{fd});
      char discard[65536];
      for (Client& client : clients)
        if (::recv(client.fd, discard, sizeof discard, 0) > 0 && !client.asked) {
          client.asked = true;
          ++requests_;
        }
      if (std::chrono::steady_clock::now() >= next_byte) {
        next_byte += 1s;
        for (Client& client : clients)
          if (client.asked && client.sent < answer.size())
            ::send(client.fd, answer.data() + client.sent++, 1, MSG_NOSIGNAL);
      }
      std::this_thread::sleep_for(20ms);
    }
    for (const Client& client : clients) ::close(client.fd);
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// The spans in the spool's files (each named NNNNNNNN-SPANS.pb).
uint64_t spooled_spans(const std::string& spool) {
  uint64_t spans = 0;
  for (const auto& entry : std::filesystem::directory_iterator(spool)) {
    unsigned long long number = 0, count = 0;
    if (std::sscanf(entry.path().filename().c_str(), "%llu-%llu.pb", &number, &count) == 2) spans += count;
  }
  return spans;
}

class OtlpPushDeadline : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto result = run(kCli + " record -q -o " + trace_ + " -- " + kEchoExample + " 2 10");
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  TemporaryDirectory scratch_;
  std::string trace_ = scratch_ / "echo";
  std::string spool_ = scratch_ / "spool";
};

// --otlp-timeout bounds an attempt (connect, send, answer), not each read: a collector that
// trickles its answer for a minute costs the push about the timeout, then the batch is spooled.
TEST_F(OtlpPushDeadline, AnAttemptEndsAtItsTimeoutWhenTheAnswerTrickles) {
  TricklingCollector collector;
  ASSERT_NE(collector.port(), 0);
  Process push({kCli, "export", trace_, "--otlp-endpoint", endpoint(collector.port()), "--otlp-timeout", "2",
                "--otlp-retry-seconds", "0", "--otlp-spool", spool_},
               scratch_ / "push.out");
  ASSERT_TRUE(push.started());
  // Generous: ten times the timeout, while the collector would trickle for sixty.
  const std::optional<int> exit_code = push.wait(20s);
  ASSERT_TRUE(exit_code.has_value()) << "the push was still waiting for the answer after 20 s";
  EXPECT_EQ(*exit_code, 1) << slurp(scratch_ / "push.out");
  EXPECT_GE(collector.requests(), 1);
  EXPECT_EQ(spooled_spans(spool_), exported_span_ids(trace_, scratch_).size());
}

// SIGTERM to `record` while an attempt waits for a trickling answer: record ends promptly, and
// every span not sent is in the spool.
TEST_F(OtlpPushDeadline, ASignalEndsRecordsPushAndSpoolsTheRest) {
  TricklingCollector collector;
  ASSERT_NE(collector.port(), 0);
  const std::string recorded = scratch_ / "recorded";
  Process record({kCli, "record", "-q", "-o", recorded, "--otlp-endpoint", endpoint(collector.port()), "--otlp-timeout",
                  "30", "--otlp-spool", spool_, "--", kEchoExample, "2", "10"},
                 scratch_ / "record.out");
  ASSERT_TRUE(record.started());
  ASSERT_TRUE(wait_for([&] { return collector.requests() >= 1 || record.exit_code().has_value(); }));
  ASSERT_FALSE(record.exit_code().has_value()) << slurp(scratch_ / "record.out");
  ::kill(record.pid(), SIGTERM);
  const std::optional<int> exit_code = record.wait(15s);
  ASSERT_TRUE(exit_code.has_value()) << "record was still pushing 15 s after SIGTERM";
  EXPECT_NE(*exit_code, 0) << slurp(scratch_ / "record.out");
  EXPECT_NE(slurp(scratch_ / "record.out").find("--otlp-resend " + spool_), std::string::npos)
      << slurp(scratch_ / "record.out");
  EXPECT_EQ(spooled_spans(spool_), exported_span_ids(recorded, scratch_).size());
}

// `record --otlp-endpoint`: the trace is pushed once the program has exited.
TEST_F(OtlpPush, RecordPushesTheTraceWhenTheProgramHasExited) {
  Receiver receiver(scratch_, log_, {});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  const std::string trace = scratch_ / "recorded";
  const auto result = run(kCli + " record -q -o " + trace + " --otlp-endpoint " + endpoint(port) +
                          " --otlp-batch-spans 9 -- " + kEchoExample + " 2 10");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("chronicle: sent "), std::string::npos) << result.err;
  EXPECT_EQ(ids_of(read_log(log_)), exported_span_ids(trace, scratch_));
}

TEST_F(OtlpPush, RecordFailsWhenThePushDoesNotDeliverAndSaysWhereTheSpoolIs) {
  const std::string trace = scratch_ / "recorded";
  auto result = run(kCli + " record -q -o " + trace + " --otlp-endpoint " + endpoint(closed_port()) +
                    " --otlp-retry-seconds 0.2 -- " + kEchoExample + " 2 10");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("--otlp-resend " + trace + ".otlp-spool"), std::string::npos) << result.err;
  EXPECT_FALSE(std::filesystem::is_empty(trace + ".otlp-spool"));
  // A bad endpoint is refused before the program runs.
  result = run(kCli + " record -q -o " + (scratch_ / "never") + " --otlp-endpoint https://127.0.0.1:1 -- " +
               kEchoExample + " 1 1");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_FALSE(std::filesystem::exists(scratch_ / "never"));
}

// `... 2>&1 | head -1`: record's push and its warnings (chunks removed under --max-size) go to a
// stderr nobody reads; the run and the push go on to their end, the exit code is the program's.
TEST_F(OtlpPush, RecordPushesWithAClosedStderr) {
  Receiver receiver(scratch_, log_, {});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  std::ofstream(scratch_ / "go-1") << "go\n";
  const std::string trace = scratch_ / "closed";
  const auto result =
      test::run_with_broken_stderr("env CHRONICLE_PACKET_SIZE=4096 " + kCli + " record -o " + trace +
                                   " --rotate 16K --max-size 64K --otlp-endpoint " + endpoint(port) +
                                   " --otlp-interval 600 -- " + kLiveSpans + " " + scratch_.path() + " 1 20000");
  ASSERT_FALSE(result.killed()) << "killed by signal " << WTERMSIG(result.status);
  EXPECT_EQ(result.exit_code(), 0);
  EXPECT_GT(reader::Trace(trace).first_chunk_number(), 1u) << "no chunk was removed";
  EXPECT_EQ(ids_of(read_log(log_)), exported_span_ids(trace, scratch_));
}

// `record --otlp-endpoint` while the program runs: tests/programs/live_spans writes spans and
// then waits for a go file, which the test makes only once the receiver has spans. Small packets
// (4 KiB) so that the program's spans reach the trace files while it waits.
class LiveRecord {
 public:
  // `packet_size`: CHRONICLE_PACKET_SIZE, or "" for the default (64 KiB).
  LiveRecord(const TemporaryDirectory& scratch, int port, int phases, const std::string& options, long spans = 2000,
             const std::string& packet_size = "4096", int idle_threads = 0)
      : scratch_(scratch), trace_(scratch / "live") {
    std::vector<std::string> argv = {"env",
                                     "CHRONICLE_PACKET_SIZE=" + packet_size,
                                     kCli,
                                     "record",
                                     "-q",
                                     "-o",
                                     trace_,
                                     "--otlp-endpoint",
                                     endpoint(port),
                                     "--otlp-spool",
                                     scratch / "spool"};
    for (size_t start = 0; start < options.size();) {
      const size_t end = std::min(options.find(' ', start), options.size());
      if (end > start) argv.push_back(options.substr(start, end - start));
      start = end + 1;
    }
    for (const std::string& word : {std::string("--"), kLiveSpans, scratch.path(), std::to_string(phases),
                                    std::to_string(spans), std::to_string(idle_threads)})
      argv.push_back(word);
    process_ = std::make_unique<Process>(argv, scratch / "record.out");
  }
  void go(int phase) { std::ofstream(scratch_ / ("go-" + std::to_string(phase))) << "go\n"; }
  std::string output() const { return slurp(scratch_ / "record.out"); }
  Process& process() { return *process_; }
  const std::string& trace() const { return trace_; }

 private:
  const TemporaryDirectory& scratch_;
  std::string trace_;
  std::unique_ptr<Process> process_;
};

// Records live_spans with `options`, each phase let go once spans of it reached the receiver
// while the program ran; returns record's output. The live pushes and the last one together are
// exactly the spans of the finished trace's export, once, in the same traces under the same parents.
std::string expect_live_push_matches_export(const TemporaryDirectory& scratch, const std::string& log, int phases,
                                            const std::string& options, const std::string& packet_size = "4096",
                                            int idle_threads = 0) {
  Receiver receiver(scratch, log, {});
  const int port = receiver.port();
  EXPECT_NE(port, 0) << receiver.output();
  LiveRecord record(scratch, port, phases, options, 2000, packet_size, idle_threads);
  EXPECT_TRUE(record.process().started());
  for (int phase = 1; phase <= phases; ++phase) {
    const size_t before = read_log(log).total_spans();
    wait_for([&] { return read_log(log).total_spans() > before || record.process().exit_code().has_value(); });
    const bool arrived_while_running = read_log(log).total_spans() > before;
    const bool still_running = !record.process().exit_code().has_value();
    record.go(phase);  // whatever happened: the program goes on to its end
    EXPECT_TRUE(arrived_while_running) << "no span of phase " << phase << " reached the receiver while the program ran";
    EXPECT_TRUE(still_running) << record.output();
  }
  EXPECT_EQ(record.process().wait(), 0) << record.output();
  EXPECT_NE(record.output().find("chronicle: sent "), std::string::npos) << record.output();
  const Received received = read_log(log);
  EXPECT_TRUE(received.errors.empty());
  EXPECT_EQ(ids_of(received), exported_span_ids(record.trace(), scratch));
  EXPECT_EQ(identities_of(received), exported_identities(record.trace(), scratch));
  EXPECT_FALSE(std::filesystem::exists(scratch / "spool"));
  return record.output();
}

TEST_F(OtlpPush, RecordPushesSpansWhileTheProgramRuns) {
  expect_live_push_matches_export(scratch_, log_, 1, "--otlp-batch-spans 100");
}

// With packets of the default size, each phase's spans fit in the main thread's open packet,
// which stays open while the program waits: the collector cuts it once its events have waited a
// push interval, so they are pushed before the program goes on (on main they were not: the
// receiver saw no span of phase 1 until the program ended).
TEST_F(OtlpPush, RecordPushesAQuietThreadsSpansWithPacketsOfTheDefaultSize) {
  expect_live_push_matches_export(scratch_, log_, 2, "--otlp-batch-spans 100 --otlp-interval 0.2", "");
}

// A thread that wrote a span and then waits, writing nothing (a pool's idle worker), holds
// nothing back once its events are written: the time below which the trace is complete passes
// its last event. On main it stayed there, and no span of the other threads after that event was
// pushed until the program ended.
TEST_F(OtlpPush, RecordPushesSpansWhileAnotherThreadIdles) {
  expect_live_push_matches_export(scratch_, log_, 2, "--otlp-batch-spans 100 --otlp-interval 0.2", "", 1);
}

// The rounds read the .ctfz units the collector has written; the events it still holds in a
// unit not yet written hold the rounds back, as the rings' do.
TEST_F(OtlpPush, RecordPushesACompressedTraceWhileTheProgramRuns) {
  expect_live_push_matches_export(scratch_, log_, 2, "--compress --otlp-batch-spans 100");
}

// The rounds follow each stream from chunk to chunk: its files in the closed chunks whole, in
// the chunk being written as far as the collector has written it.
TEST_F(OtlpPush, RecordPushesARotatedTraceWhileTheProgramRuns) {
  const std::string output =
      expect_live_push_matches_export(scratch_, log_, 3, "--rotate 8K --otlp-batch-spans 100 --otlp-interval 0.2");
  EXPECT_GT(reader::trace_chunks(scratch_ / "live").size(), 2u) << output;
}

TEST_F(OtlpPush, RecordPushesARotatedCompressedTraceWhileTheProgramRuns) {
  expect_live_push_matches_export(scratch_, log_, 2, "--rotate 8K --compress --otlp-batch-spans 100");
}

// What --max-size removes before a round reads it is not pushed, and record says how many events
// that was. With no round before the end, the end reads the trace as it is left: what it misses
// is what the collector wrote and removed, the spans are those of the finished trace's export.
TEST_F(OtlpPush, RecordSaysWhatMaxSizeRemovedBeforeThePushReadIt) {
  Receiver receiver(scratch_, log_, {});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  LiveRecord record(scratch_, port, 1, "--rotate 16K --max-size 64K --otlp-interval 600", 20000);
  record.go(1);
  ASSERT_EQ(record.process().wait(), 0) << record.output();
  const std::string output = record.output();
  const auto stats = run(kCli + " stats --json " + record.trace());
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const uint64_t in_trace = nlohmann::json::parse(stats.out)["events"].get<uint64_t>();
  uint64_t read = 0, written = 0, removed = 0;
  const size_t at = output.find("chronicle: the push read ");
  ASSERT_NE(at, std::string::npos) << output;
  ASSERT_EQ(
      std::sscanf(output.c_str() + at, "chronicle: the push read %lu of %lu events: --max-size removed the other %lu",
                  &read, &written, &removed),
      3)
      << output;
  EXPECT_EQ(read, in_trace) << output;
  EXPECT_EQ(removed, written - read) << output;
  EXPECT_GT(removed, 0u) << output;
  EXPECT_NE(output.find("removed to stay under --max-size"), std::string::npos) << output;
  const Received received = read_log(log_);
  EXPECT_TRUE(received.errors.empty());
  EXPECT_EQ(ids_of(received), exported_span_ids(record.trace(), scratch_));
}

// Chunks removed while the rounds read them (how many, and where the rounds stand then, depends
// on timing): the push reads on, each span it sends goes once, and what it missed is at most what
// --max-size removed.
TEST_F(OtlpPush, RecordPushesLiveWhileMaxSizeRemovesChunks) {
  Receiver receiver(scratch_, log_, {});
  const int port = receiver.port();
  ASSERT_NE(port, 0) << receiver.output();
  const int phases = 3;
  LiveRecord record(scratch_, port, phases, "--rotate 8K --max-size 32K --otlp-interval 0.05", 4000);
  ASSERT_TRUE(record.process().started());
  for (int phase = 1; phase <= phases; ++phase) {
    const size_t before = read_log(log_).total_spans();
    // A chance for the rounds to read some of the phase before it is removed; not required.
    wait_for([&] { return read_log(log_).total_spans() > before || record.process().exit_code().has_value(); }, 2s);
    record.go(phase);
  }
  ASSERT_EQ(record.process().wait(), 0) << record.output();
  const std::string output = record.output();
  EXPECT_EQ(output.find("could not be read"), std::string::npos) << output;
  EXPECT_NE(output.find("removed to stay under --max-size"), std::string::npos) << output;
  const Received received = read_log(log_);
  EXPECT_TRUE(received.errors.empty());
  for (const auto& [id, times] : received.times) EXPECT_EQ(times, 1) << id;
  // The end reads the finished trace from where the rounds stood: at least its spans are sent.
  EXPECT_GE(received.total_spans(), exported_span_ids(record.trace(), scratch_).size()) << output;
  if (const size_t at = output.find("chronicle: the push read "); at != std::string::npos) {
    const auto stats = run(kCli + " stats --json " + record.trace());
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    const uint64_t in_trace = nlohmann::json::parse(stats.out)["events"].get<uint64_t>();
    uint64_t read = 0, written = 0;
    ASSERT_EQ(std::sscanf(output.c_str() + at, "chronicle: the push read %lu of %lu", &read, &written), 2) << output;
    EXPECT_GE(read, in_trace) << output;
  }
}

// Counts the spans a round hands on.
struct CountingSink : exports::OtlpSpanSink {
  void begin_resource(const exports::OtlpResource&) override {}
  void span(const exports::OtlpSpan&) override { ++spans; }
  void end_resource() override {}
  size_t spans = 0;
};

// Calls `visit(const reader::Event&)` for every event of the chunk directories [first, end).
template <typename Visitor>
void for_each_event_in(const std::vector<std::string>& chunks, size_t first, size_t end, Visitor visit) {
  for (size_t k = first; k < end; ++k) {
    const reader::Trace chunk(chunks[k]);
    for (size_t stream = 0; stream < chunk.streams().size(); ++stream)
      chunk.for_each_in_stream(stream, [&](const reader::Event& event) {
        visit(event);
        return true;
      });
  }
}

// What the collector says while it writes chunk `writing` (an index), before it has written a
// packet there: the events older than its first are in the chunks before.
struct CollectorAt {
  uint64_t complete_below = UINT64_MAX;
  reader::CommittedFiles committed;
  CollectorAt(const std::vector<std::string>& chunks, size_t writing) {
    committed.writing_chunk = std::filesystem::path(chunks[writing]).filename().string();
    for_each_event_in(chunks, writing, chunks.size(),
                      [&](const reader::Event& event) { complete_below = std::min(complete_below, event.ticks); });
  }
};

// What the collector says of a trace (or of its chunk `prefix`, "chunk-N/") it has written whole
// so far.
reader::CommittedFiles whole_files(const std::string& directory, const std::string& prefix = "") {
  reader::CommittedFiles committed;
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    committed.sizes[prefix + entry.path().filename().string()] = entry.file_size();
  return committed;
}

// The first chunk a round can start in and read something: one after the chunk that holds the
// trace's earliest event. Which chunk that is depends on the scheduling: a thread's first packet
// is written once it is full, after other threads' later packets perhaps.
size_t first_chunk_a_round_reads_before(const std::vector<std::string>& chunks) {
  for (size_t writing = 1; writing < chunks.size(); ++writing) {
    const CollectorAt at(chunks, writing);
    bool any_older = false;
    for_each_event_in(chunks, 0, writing,
                      [&](const reader::Event& event) { any_older = any_older || event.ticks < at.complete_below; });
    if (any_older) return writing;
  }
  return chunks.size();
}

// Rounds follow each stream from chunk to chunk, and one that stopped in a chunk --max-size
// removed before the next goes on in the streams' files of the chunks left, from their starts:
// no event is read twice, none left is missed.
TEST(OtlpLiveTrace, RoundsFollowTheStreamsAcrossChunksAndPastTheOnesRemoved) {
  TemporaryDirectory scratch;
  std::ofstream(scratch / "go-1") << "go\n";
  const std::string trace = scratch / "rotated";
  const auto recorded = run("env CHRONICLE_PACKET_SIZE=4096 " + kCli + " record -q --rotate 8K -o " + trace + " -- " +
                            kLiveSpans + " " + scratch.path() + " 1 4000");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  const std::vector<std::string> chunks = reader::trace_chunks(trace);
  ASSERT_GE(chunks.size(), 5u);
  // Each thread writes about 8 packets of 4 KiB, at most 2 to a chunk: the thread of the earliest
  // event has packets in later chunks, however the threads ran.
  const size_t first = first_chunk_a_round_reads_before(chunks);
  ASSERT_LT(first + 1, chunks.size()) << "the earliest event is in chunk " << first << " of " << chunks.size();
  exports::OtlpLiveTrace live(trace);
  CountingSink sink;
  const CollectorAt at_first(chunks, first), at_next(chunks, first + 1);
  live.advance(at_first.complete_below, at_first.committed, sink);
  EXPECT_GT(live.events_read(), 0u);
  live.advance(at_next.complete_below, at_next.committed, sink);
  uint64_t older = 0;
  for_each_event_in(chunks, 0, first + 1,
                    [&](const reader::Event& event) { older += event.ticks < at_next.complete_below; });
  ASSERT_EQ(live.events_read(), older) << "the second round read again what the first had read, or missed some";
  // --max-size removes the chunks the rounds read in; the collector is in the last chunk, its
  // files whole.
  for (size_t k = 0; k <= first; ++k) std::filesystem::remove_all(chunks[k]);
  CollectorAt at_the_end(chunks, chunks.size() - 1);
  at_the_end.committed.sizes = whole_files(chunks.back(), at_the_end.committed.writing_chunk + "/").sizes;
  live.advance(UINT64_MAX, at_the_end.committed, sink);
  uint64_t left = 0;
  for_each_event_in(chunks, first + 1, chunks.size(), [&](const reader::Event&) { ++left; });
  EXPECT_EQ(live.events_read(), older + left);
  EXPECT_GT(sink.spans, 0u);
}

// Writes `events` (thread, ticks) as span begins into `directory`, replacing what it held: the
// same trace growing, as the collector appends to it.
void write_span_begins(const std::string& directory, const std::vector<std::pair<uint32_t, uint64_t>>& events) {
  format::TraceDescription description;
  description.clock = {1'000'000'000, 0, 0, 1'700'000'000'000'000'000, 0, 0};
  description.pid = 4242;
  description.process_name = "late";
  format::TraceWriter writer(description);
  const uint32_t site = writer.define_site(format::SiteKind::span, "late", "step");
  for (const auto& [thread, ticks] : events) writer.add(thread, format::EventId::span_begin, ticks, {uint64_t{site}});
  const std::string fresh = directory + ".next";
  writer.write(fresh);
  std::filesystem::remove_all(directory);
  std::filesystem::rename(fresh, directory);
}

// An event that reaches the files after a round read past its time (its thread stopped between
// reading the clock and committing, longer than the collector's grace) is still read, in the
// next round, and counted as late: record warns about those (their spans went out of order).
TEST(OtlpLiveTrace, AnEventWrittenAfterARoundPassedItsTimeIsReadAndCountedLate) {
  TemporaryDirectory scratch;
  const std::string trace = scratch / "growing";
  write_span_begins(trace, {{1, 10}, {2, 5}, {1, 25}, {1, 35}});
  exports::OtlpLiveTrace live(trace);
  CountingSink sink;
  live.advance(30, whole_files(trace), sink);
  EXPECT_EQ(live.events_read(), 3u);
  EXPECT_EQ(live.late_events(), 0u);
  // Thread 2's event at 12 comes now, after the round above read everything older than 30.
  write_span_begins(trace, {{1, 10}, {2, 5}, {1, 25}, {1, 35}, {2, 12}, {2, 38}});
  live.advance(40, whole_files(trace), sink);
  EXPECT_EQ(live.events_read(), 6u);
  EXPECT_EQ(live.late_events(), 1u);
}

}  // namespace
}  // namespace chronicle
