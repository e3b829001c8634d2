// Two real hosts (issue 13): a traced echo server and client, each in its own network namespace
// (joined by a veth pair) and UTS namespace (its own hostname), each under `chronicle record`, the
// server's wall clock moved by CHRONICLE_TEST_WALL_CLOCK_OFFSET_NS. `chronicle merge` must find
// that offset from the messages alone: after it, every receive follows its send, and the offset
// it applied is the injected one within the bound it reports. Needs root (namespaces); skips
// elsewhere.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "merge/message_pairs.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kEchoExample = ECHO_EXAMPLE;

constexpr int kConnections = 3;
constexpr int kMessages = 50;
constexpr int kPort = 47001;
constexpr int64_t kInjectedOffsetNs = 5'000'000'000;  // the server's wall clock, 5 s ahead
const std::string kServerHost = "chronicle-server";
const std::string kClientHost = "chronicle-client";
const std::string kServerAddress = "10.213.0.1";
const std::string kClientAddress = "10.213.0.2";
const std::string kNamespacePrefix = "chronicle-two-hosts-";

std::string quoted(const std::string& text) {
  return "'" + text + "'";
}

using test::slurp;

// A process started with its own process group, killed with its group if still running when
// it goes out of scope (a failed assertion included).
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
    pid_ = ::fork();
    if (pid_ != 0) return;
    ::setpgid(0, 0);
    // If the test dies, so does the child (the namespaces' leftovers are cleared by the next run).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::freopen(out.c_str(), "w", stdout);
    std::freopen(err.c_str(), "w", stderr);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::_Exit(127);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ <= 0 || exit_code_) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }

  // Its exit code once it has ended, without waiting.
  std::optional<int> poll() {
    if (exit_code_ || pid_ <= 0) return exit_code_;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_)
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

  std::optional<int> wait_for(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!poll() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return poll();
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Kills what still runs in a namespace, then deletes it (with the veth end inside).
void remove_namespace(const std::string& name) {
  const auto pids = run("ip netns pids " + quoted(name));
  std::istringstream lines(pids.out);
  for (pid_t pid; lines >> pid;) ::kill(pid, SIGKILL);
  run("ip netns delete " + quoted(name));
}

// Namespaces left by a run that was killed (its pid, in the name, is gone).
void remove_stale_namespaces() {
  std::istringstream lines(run("ip netns list").out);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind(kNamespacePrefix, 0) != 0) continue;
    const pid_t owner = std::atoi(name.c_str() + kNamespacePrefix.size());
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) remove_namespace(name);
  }
}

// Two network namespaces joined by a veth pair: server at kServerAddress, client at
// kClientAddress. Deleted, with whatever runs in them, when it goes out of scope.
class NamespacePair {
 public:
  NamespacePair()
      : server_(kNamespacePrefix + std::to_string(::getpid()) + "-server"),
        client_(kNamespacePrefix + std::to_string(::getpid()) + "-client") {}
  NamespacePair(const NamespacePair&) = delete;
  NamespacePair& operator=(const NamespacePair&) = delete;
  ~NamespacePair() {
    for (const std::string& name : created_) remove_namespace(name);
  }

  // "" when set up, else what failed.
  std::string set_up() {
    for (const std::string& name : {server_, client_}) {
      const auto added = run("ip netns add " + quoted(name));
      if (added.exit_code != 0) return "ip netns add: " + added.err;
      created_.push_back(name);
    }
    const std::string suffix = std::to_string(::getpid());
    const std::vector<std::string> commands = {
        // Made in the namespaces directly: nothing appears in the test's own namespace.
        "ip link add vs" + suffix + " netns " + server_ + " type veth peer name vc" + suffix + " netns " + client_,
        "ip -n " + server_ + " addr add " + kServerAddress + "/24 dev vs" + suffix,
        "ip -n " + client_ + " addr add " + kClientAddress + "/24 dev vc" + suffix,
        "ip -n " + server_ + " link set vs" + suffix + " up",
        "ip -n " + client_ + " link set vc" + suffix + " up",
        "ip -n " + server_ + " link set lo up",
        "ip -n " + client_ + " link set lo up",
    };
    for (const std::string& command : commands) {
      const auto result = run(command);
      if (result.exit_code != 0) return command + ": " + result.err;
    }
    return "";
  }

  // argv running `command` (a shell command line) in `name`'s network namespace, in a new UTS
  // namespace whose hostname is `hostname`.
  static std::vector<std::string> in_host(const std::string& name, const std::string& hostname,
                                          const std::string& command) {
    return {
        "ip", "netns", "exec", name, "unshare", "--uts", "sh", "-c", "hostname " + hostname + " && exec " + command};
  }

  const std::string& server() const { return server_; }
  const std::string& client() const { return client_; }

 private:
  std::string server_;
  std::string client_;
  std::vector<std::string> created_;
};

// Whether `path` holds the server's "listening" line, waiting for it (or the server's end).
bool wait_for_listening(Child& server, const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(path).find("echo: listening on port " + std::to_string(kPort)) != std::string::npos) return true;
    if (server.poll()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<reader::Trace> open_all(const std::string& directory) {
  std::vector<reader::Trace> traces;
  for (const std::string& path : reader::find_traces(directory)) traces.emplace_back(path);
  return traces;
}

struct PairCounts {
  size_t client_to_server = 0;
  size_t server_to_client = 0;
  size_t receive_before_send = 0;
};

PairCounts count_pairs(const std::vector<reader::Trace>& traces, const std::vector<merge::MessagePair>& pairs) {
  PairCounts counts;
  for (const merge::MessagePair& pair : pairs) {
    const std::string& from = traces[pair.sender].description().hostname;
    const std::string& to = traces[pair.receiver].description().hostname;
    counts.client_to_server += from == kClientHost && to == kServerHost;
    counts.server_to_client += from == kServerHost && to == kClientHost;
    counts.receive_before_send += pair.receive_ns < pair.send_ns;
  }
  return counts;
}

// The server's end of every pair (its send or its receive), in its trace's Unix nanoseconds,
// sorted: the same events before and after the merge, so that their difference is the
// correction the merge applied at each of them.
std::vector<int64_t> server_times(const std::vector<reader::Trace>& traces,
                                  const std::vector<merge::MessagePair>& pairs) {
  std::vector<int64_t> times;
  for (const merge::MessagePair& pair : pairs) {
    if (traces[pair.sender].description().hostname == kServerHost) times.push_back(pair.send_ns);
    if (traces[pair.receiver].description().hostname == kServerHost) times.push_back(pair.receive_ns);
  }
  std::sort(times.begin(), times.end());
  return times;
}

const reader::Trace& trace_of(const std::vector<reader::Trace>& traces, const std::string& host) {
  for (const reader::Trace& trace : traces)
    if (trace.description().hostname == host) return trace;
  throw std::runtime_error("no trace of " + host);
}

// Records the server (its wall clock moved) and the client talking across the veth pair, into
// DIRECTORY/server and DIRECTORY/client. The processes are killed if anything fails.
void record_two_hosts(const NamespacePair& namespaces, const TemporaryDirectory& directory) {
  Child server(NamespacePair::in_host(namespaces.server(), kServerHost,
                                      "env CHRONICLE_TEST_WALL_CLOCK_OFFSET_NS=" + std::to_string(kInjectedOffsetNs) +
                                          " " + quoted(kCli) + " record -q -o " + quoted(directory / "server") +
                                          " -- " + quoted(kEchoExample) + " --server " + std::to_string(kPort) + " " +
                                          std::to_string(kConnections)),
               directory / "server.out", directory / "server.err");
  ASSERT_TRUE(server.started());
  ASSERT_TRUE(wait_for_listening(server, directory / "server.out", std::chrono::seconds(60)))
      << "the server did not say it listens: " << slurp(directory / "server.err");
  Child client(
      NamespacePair::in_host(namespaces.client(), kClientHost,
                             quoted(kCli) + " record -q -o " + quoted(directory / "client") + " -- " +
                                 quoted(kEchoExample) + " --client " + kServerAddress + " " + std::to_string(kPort) +
                                 " " + std::to_string(kConnections) + " " + std::to_string(kMessages)),
      directory / "client.out", directory / "client.err");
  ASSERT_TRUE(client.started());
  ASSERT_EQ(client.wait_for(std::chrono::seconds(120)), 0) << slurp(directory / "client.err");
  // The server ends once its connections have closed.
  ASSERT_EQ(server.wait_for(std::chrono::seconds(60)), 0) << slurp(directory / "server.err");
}

// The server's correction undoes the injected offset within the bound merge wrote: the true
// offset between two namespaces of one machine is 0, and so is the true drift. Returns the
// largest error at the pairs.
int64_t expect_offset_undone(const std::vector<reader::Trace>& recorded,
                             const std::vector<merge::MessagePair>& recorded_pairs,
                             const std::vector<reader::Trace>& merged, const std::vector<merge::MessagePair>& pairs) {
  const auto& correction = trace_of(merged, kServerHost).description().correction;
  EXPECT_TRUE(correction.has_value());
  if (!correction) return -1;
  EXPECT_EQ(correction->reference_host, kClientHost);
  EXPECT_GE(correction->bound_ns, 0) << "the bound is unknown: " << correction->method;
  // At the pairs (the span the bound covers): each server event moved by -injected, within it.
  const std::vector<int64_t> original = server_times(recorded, recorded_pairs);
  const std::vector<int64_t> corrected = server_times(merged, pairs);
  EXPECT_EQ(original.size(), corrected.size());
  if (original.empty() || original.size() != corrected.size()) return -1;
  int64_t largest_error = 0;
  size_t largest_at = 0;
  for (size_t i = 0; i < original.size(); ++i) {
    const int64_t error = std::llabs(corrected[i] - original[i] + kInjectedOffsetNs);
    if (error <= largest_error) continue;
    largest_error = error;
    largest_at = i;
  }
  EXPECT_LE(largest_error, correction->bound_ns)
      << "at the server's pair event " << largest_at << " of " << original.size();
  // At the trace's start, before the first pair, the drift applied (the true one is 0) adds its
  // share over the time to that pair.
  const auto start = static_cast<int64_t>(trace_of(recorded, kServerHost).description().clock.realtime_ns_at_start);
  const double drift_share =
      std::abs(static_cast<double>(correction->drift_ppb)) * 1e-9 * static_cast<double>(original.front() - start);
  EXPECT_LE(static_cast<double>(std::llabs(correction->offset_ns + kInjectedOffsetNs)),
            static_cast<double>(correction->bound_ns) + drift_share + 1)
      << "correction " << correction->offset_ns << " ns, bound " << correction->bound_ns << " ns, drift "
      << correction->drift_ppb << " ppb";
  return largest_error;
}

// `merge` printed a line per host, the server's with the offset and the pairs that aligned it.
void expect_host_lines(const std::string& out, size_t pairs) {
  EXPECT_NE(out.find("host " + kClientHost + " (1 trace): the reference clock"), std::string::npos) << out;
  // "host S (1 trace): offset -5.000000 s, drift ..., bound ±10.2 us, 300 pairs with C: ..."
  const std::string prefix = "host " + kServerHost + " (1 trace): offset ";
  const size_t at = out.find(prefix);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  std::istringstream fields(line.substr(prefix.size()));
  double offset = 0;
  std::string unit;
  fields >> offset >> unit;
  EXPECT_EQ(unit, "s,") << line;
  EXPECT_NEAR(offset, -kInjectedOffsetNs / 1e9, 1e-3) << line;
  const size_t with = line.find(" pairs with " + kClientHost);
  ASSERT_NE(with, std::string::npos) << line;
  const size_t number = line.rfind(' ', with - 1) + 1;
  EXPECT_EQ(std::stoull(line.substr(number, with - number)), pairs) << line;
}

TEST(TwoHosts, MergeFindsTheInjectedOffsetWithinItsBound) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: it creates network and UTS namespaces";
  remove_stale_namespaces();
  NamespacePair namespaces;
  if (const std::string failed = namespaces.set_up(); !failed.empty())
    GTEST_SKIP() << "cannot create the namespaces and their veth pair: " << failed;
  TemporaryDirectory directory;
  ASSERT_NO_FATAL_FAILURE(record_two_hosts(namespaces, directory));
  const auto merged = run(kCli + " merge " + quoted(directory / "client") + " " + quoted(directory / "server") +
                          " -o " + quoted(directory / "merged"));
  ASSERT_EQ(merged.exit_code, 0) << merged.err;

  // Before the merge the server's clock is 5 s ahead: every echo arrives before it was sent.
  std::vector<reader::Trace> recorded = open_all(directory / "client");
  for (reader::Trace& trace : open_all(directory / "server")) recorded.push_back(std::move(trace));
  const std::vector<merge::MessagePair> recorded_pairs = merge::find_message_pairs(recorded);
  const PairCounts before = count_pairs(recorded, recorded_pairs);
  EXPECT_EQ(before.receive_before_send, before.server_to_client);

  // (a) After it every receive follows its send, both ways.
  const std::vector<reader::Trace> traces = open_all(directory / "merged");
  ASSERT_EQ(traces.size(), 2u);
  const std::vector<merge::MessagePair> pairs = merge::find_message_pairs(traces);
  const PairCounts after = count_pairs(traces, pairs);
  EXPECT_EQ(after.receive_before_send, 0u);
  EXPECT_GE(after.client_to_server, size_t{kConnections * kMessages});
  EXPECT_GE(after.server_to_client, size_t{kConnections * kMessages});
  EXPECT_EQ(after.client_to_server + after.server_to_client, pairs.size());
  EXPECT_EQ(pairs.size(), recorded_pairs.size());

  // (b) The injected offset found, within the bound; (c) what merge said.
  const int64_t largest_error = expect_offset_undone(recorded, recorded_pairs, traces, pairs);
  expect_host_lines(merged.out, pairs.size());
  const auto& correction = trace_of(traces, kServerHost).description().correction;
  ASSERT_TRUE(correction.has_value());
  EXPECT_EQ(correction->pairs, pairs.size());
  // The figures of docs/performance-log.md ("Clock alignment on two namespaces").
  std::printf(
      "two hosts: correction at start %lld ns (error %lld ns), largest error at the pairs %lld ns, "
      "bound %lld ns, %zu pairs (%s)\n",
      static_cast<long long>(correction->offset_ns),
      static_cast<long long>(std::llabs(correction->offset_ns + kInjectedOffsetNs)),
      static_cast<long long>(largest_error), static_cast<long long>(correction->bound_ns), pairs.size(),
      correction->method.c_str());
}

}  // namespace
}  // namespace chronicle
