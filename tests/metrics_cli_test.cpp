// Metrics read from outside a running program: `chronicle metrics query/show/serve`, `top`,
// `stats --counters`, the in-process exporter, promtool, and a real Prometheus scraping them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/metrics.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "metrics/snapshot.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::run;

// A child process with its standard input and output on pipes; closing its input ends it.
class Child {
 public:
  explicit Child(std::vector<std::string> argv) {
    int to_child[2], from_child[2];
    // Close-on-exec: a later child (`metrics serve`) holding this one's input open would keep it
    // from ever seeing its end. dup2 below clears the flag on the child's own ends.
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      close(to_child[1]);
      close(from_child[0]);
      std::vector<char*> args;
      for (auto& arg : argv) args.push_back(arg.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    input_ = to_child[1];
    output_ = from_child[0];
  }
  // A child still running at the end of a test (one that failed early) is terminated.
  ~Child() {
    if (pid_ <= 0) return;
    close(input_);
    for (int i = 0; i < 40 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(pid_, SIGKILL);
    close(output_);
    waitpid(pid_, nullptr, 0);
  }

  std::string read_line() {
    std::string line;
    char c;
    while (::read(output_, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  int pid() const { return pid_; }
  void stop() {
    if (pid_ <= 0) return;
    close(input_);
    close(output_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void kill_now() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    stop();
  }

 private:
  int pid_ = -1;
  int input_ = -1;
  int output_ = -1;
};

const std::string kCli = CHRONICLE_CLI;

uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  close(fd);
  return ntohs(address.sin_port);
}

template <typename Condition>
bool wait_until(Condition condition, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(MetricsCli, ReadsARunningProcessWithoutItsHelp) {
  Child writer({METRICS_WRITER, "2"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  metrics::MetricsMapping mapping(metrics::MetricsMapping::path_for(writer.pid()));
  EXPECT_TRUE(mapping.writer_alive());
  const auto snapshot = mapping.read();
  EXPECT_EQ(snapshot.pid, writer.pid());
  EXPECT_EQ(snapshot.metrics.size(), 10u);

  auto total = run(kCli + " metrics query " + std::to_string(writer.pid()) + " requests");
  EXPECT_EQ(total.exit_code, 0) << total.err;
  EXPECT_EQ(total.out, "requests 284\n");
  auto by_pool = run(kCli + " metrics query " + std::to_string(writer.pid()) + " requests --by pool");
  EXPECT_EQ(by_pool.out, "requests{pool=\"p1\"} 84\nrequests{pool=\"p2\"} 200\n");
  auto drill = run(kCli + " metrics query " + std::to_string(writer.pid()) +
                   " requests --where pool=p1 --where customer=acme --drill vm");
  EXPECT_EQ(drill.out,
            "requests{pool=\"p1\",customer=\"acme\",vm=\"vm1\"} 60\n"
            "requests{pool=\"p1\",customer=\"acme\",vm=\"vm2\"} 10\n");
  auto max = run(kCli + " metrics query " + std::to_string(writer.pid()) + " requests --by customer --op max");
  EXPECT_NE(max.out.find("requests{customer=\"acme\"} 40\n"), std::string::npos) << max.out;
}

// The usual name taken in advance (here by a directory, which not even root's unlink removes)
// does not hide a process's metrics: it makes another name, where the readers find them.
TEST(MetricsCli, NameTakenInAdvanceMetricsGoToAnotherName) {
  test::TemporaryDirectory directory;
  Child writer({"/bin/sh", "-c",
                "mkdir " + directory.path() + "/chronicle-metrics-$$.shm && exec env CHRONICLE_METRICS_DIR=" +
                    directory.path() + " " + METRICS_WRITER + " 1"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  const auto total = run("CHRONICLE_METRICS_DIR=" + directory.path() + " " + kCli + " metrics query " +
                         std::to_string(writer.pid()) + " requests");
  EXPECT_EQ(total.exit_code, 0) << total.err;
  EXPECT_EQ(total.out, "requests 142\n") << total.err;
  EXPECT_NE(total.err.find("refused"), std::string::npos) << total.err;
}

TEST(MetricsCli, TopPrintsATableOfValuesAndRates) {
  Child writer({METRICS_WRITER, "2"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  auto top = run(kCli + " top " + std::to_string(writer.pid()) + " --interval 100ms --iterations 2");
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("chronicle top - pid " + std::to_string(writer.pid())), std::string::npos);
  EXPECT_NE(top.out.find("tcp.bytes_acked{stream=\"12\"}"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("8192"), std::string::npos);
  EXPECT_NE(top.out.find("rpc.latency_seconds{customer=\"acme\"}"), std::string::npos);
  EXPECT_EQ(test::count_lines(top.out), 2 * (3 + 10) + 1);  // two tables, a blank line between
  auto missing = run(kCli + " top 999999999 --once");
  EXPECT_NE(missing.exit_code, 0);
}

TEST(MetricsCli, QueryOfAnUnknownMetricSaysSoAndExitsWithOne) {
  Child writer({METRICS_WRITER, "1"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  auto missing = run(kCli + " metrics query " + std::to_string(writer.pid()) + " nosuchmetric");
  EXPECT_EQ(missing.exit_code, 1) << missing.out << missing.err;
  EXPECT_EQ(missing.out, "");
  EXPECT_NE(missing.err.find("no metric named nosuchmetric"), std::string::npos) << missing.err;
}

// Once the program has exited its values are frozen: serving them as if it ran would keep
// Prometheus's `up` at 1 for a dead program.
TEST(MetricsCli, ServeAnswers503OnceTheProcessHasEnded) {
  Child writer({METRICS_WRITER, "1"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  const int pid = writer.pid();
  const uint16_t serve_port = free_port();
  Child serve({kCli, "metrics", "serve", std::to_string(pid), "--port", std::to_string(serve_port)});
  httplib::Client client("127.0.0.1", serve_port);
  ASSERT_TRUE(wait_until([&] { return static_cast<bool>(client.Get("/metrics")); }, std::chrono::seconds(10)));
  auto live = client.Get("/metrics");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);

  writer.stop();  // closes its input: the writer exits and is reaped
  int status = 0;
  std::string body;
  EXPECT_TRUE(wait_until(
      [&] {
        auto response = client.Get("/metrics");
        if (!response) return false;
        status = response->status;
        body = response->body;
        return status == 503;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(status, 503) << body;
  EXPECT_NE(body.find("process " + std::to_string(pid) + " has ended"), std::string::npos) << body;
  serve.kill_now();
}

// promtool check metrics reads the Prometheus text format (OpenMetrics counters' HELP, on the
// family without _total, looks to it like a missing one); the OpenMetrics form is checked by the
// real Prometheus scrape below, which asks for OpenMetrics first.
TEST(MetricsCli, PromtoolAcceptsTheExposition) {
  Child writer({METRICS_WRITER, "2"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  for (const std::string format : {"openmetrics", "prometheus"}) {
    auto shown = run(kCli + " metrics show " + std::to_string(writer.pid()) + " --format " + format);
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find("requests_total{customer=\"acme\",pool=\"p1\",stream=\"s1\",vm=\"vm1\"} 20"),
              std::string::npos)
        << shown.out;
    test::TemporaryDirectory directory;
    std::ofstream(directory / "metrics.txt") << shown.out;
    if (format == "openmetrics") {
      EXPECT_TRUE(shown.out.ends_with("# EOF\n"));
      continue;
    }
    auto check = run(std::string(PROMTOOL) + " check metrics < " + (directory / "metrics.txt"));
    EXPECT_EQ(check.exit_code, 0) << format << ": " << check.out << check.err;
    EXPECT_EQ(check.out + check.err, "");
  }
}

TEST(MetricsCli, InProcessExporterServesOpenMetrics) {
  Child writer({METRICS_WRITER, "2", "--export", "0"});
  const std::string ready = writer.read_line();
  ASSERT_TRUE(ready.starts_with("ready ")) << ready;
  const int port = std::stoi(ready.substr(6));
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  auto response = client.Get("/metrics", {{"Accept", "application/openmetrics-text; version=1.0.0"}});
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(response->get_header_value("Content-Type").starts_with("application/openmetrics-text"));
  EXPECT_NE(response->body.find("tcp_bytes_acked_total{stream=\"12\"} 8192\n"), std::string::npos) << response->body;
  EXPECT_TRUE(response->body.ends_with("# EOF\n"));
}

TEST(MetricsCli, StatsCountersOverWindows) {
  test::TemporaryDirectory directory;
  Counter requests{"cli.requests"};
  Gauge depth{"cli.depth"};
  Config config;
  config.output = directory / "trace";
  config.self_stats_interval = std::chrono::milliseconds(0);  // windows end at the program's last event
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 5; ++i) {
    requests.add(3);
    depth.set(i);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop();
  auto all = run(kCli + " stats --counters " + (directory / "trace") + " --name 'cli.*'");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("cli.requests"), std::string::npos) << all.out;
  // samples 5, sum 15, mean 3, last 15
  EXPECT_NE(all.out.find("counter           5           15            3"), std::string::npos) << all.out;
  auto last = run(kCli + " stats --counters " + (directory / "trace") + " --last 5m --name cli.requests");
  EXPECT_NE(last.out.find("           15"), std::string::npos) << last.out;
  // The trace's last event is the last depth, its first the first increment.
  auto since = run(kCli + " stats --counters " + (directory / "trace") + " --since -1ns --name cli.depth");
  EXPECT_NE(since.out.find("level             1            4            4            3"), std::string::npos)
      << since.out;
  auto between = run(kCli + " stats --counters " + (directory / "trace") + " --between +0s +1us --name cli.requests");
  EXPECT_NE(between.out.find("counter           1            3            3"), std::string::npos) << between.out;
  auto bad = run(kCli + " stats --counters " + (directory / "trace") + " --last soon");
  EXPECT_NE(bad.exit_code, 0);
}

// Prometheus on loopback, with a temporary configuration and data directory, scrapes
// `chronicle metrics serve`; its HTTP API must then give the values the program set.
TEST(MetricsPrometheus, ScrapesServeAndAnswersQueries) {
  Child writer({METRICS_WRITER, "2"});
  ASSERT_EQ(writer.read_line(), "ready 0");
  const uint16_t serve_port = free_port();
  Child serve({kCli, "metrics", "serve", std::to_string(writer.pid()), "--port", std::to_string(serve_port)});
  ASSERT_TRUE(wait_until([&] { return static_cast<bool>(httplib::Client("127.0.0.1", serve_port).Get("/metrics")); },
                         std::chrono::seconds(5)));

  test::TemporaryDirectory directory;
  std::ofstream(directory / "prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                              << "scrape_configs:\n  - job_name: chronicle\n    static_configs:\n"
                                              << "      - targets: ['127.0.0.1:" << serve_port << "']\n";
  const uint16_t prometheus_port = free_port();
  Child prometheus({PROMETHEUS, "--config.file=" + (directory / "prometheus.yml"),
                    "--storage.tsdb.path=" + (directory / "data"),
                    "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port), "--log.level=warn"});
  httplib::Client api("127.0.0.1", prometheus_port);
  auto query = [&](const std::string& promql) -> std::optional<double> {
    auto response = api.Get("/api/v1/query", {{"query", promql}}, httplib::Headers{});
    if (!response || response->status != 200) return std::nullopt;
    const auto body = nlohmann::json::parse(response->body);
    const auto& result = body["data"]["result"];
    if (result.empty()) return std::nullopt;
    return std::stod(result[0]["value"][1].get<std::string>());
  };
  ASSERT_TRUE(wait_until([&] { return query("up{job=\"chronicle\"}") == 1.0; }, std::chrono::seconds(20)))
      << "Prometheus did not scrape the endpoint";
  EXPECT_EQ(query("sum(requests_total)"), 284);
  EXPECT_EQ(query("sum by (pool) (requests_total{pool=\"p1\"})"), 84);
  EXPECT_EQ(query("tcp_bytes_acked_total{stream=\"12\"}"), 8192);
  EXPECT_EQ(query("disk_free_bytes{device=\"sda\"}"), 1.5e9);
  EXPECT_EQ(query("rpc_latency_seconds_count{customer=\"acme\"}"), 10);
  EXPECT_EQ(query("rpc_latency_seconds_bucket{customer=\"acme\",le=\"0.0025\"}"), 6);
  const auto median = query("histogram_quantile(0.5, rpc_latency_seconds_bucket{customer=\"acme\"})");
  ASSERT_TRUE(median);
  EXPECT_NEAR(*median, 0.001 + 0.0015 * (5.0 / 6.0), 1e-9);
  prometheus.kill_now();
  serve.kill_now();
}

}  // namespace
}  // namespace chronicle
