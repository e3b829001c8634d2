// Metrics in one process: values summed over thread shards, the mapping as another process
// reads it, queries, exposition, trace events for metric changes, counter windows.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/metrics.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "analysis/counter_windows.hpp"
#include "http/http_limits.hpp"
#include "http/http_server.hpp"
#include "metrics/exposition.hpp"
#include "metrics/query.hpp"
#include "metrics/snapshot.hpp"
#include "starved_server.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using metrics::MetricSample;
using metrics::MetricsSnapshot;

const MetricSample* find(const MetricsSnapshot& snapshot, std::string_view name, const Labels& labels = {}) {
  Labels sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& sample : snapshot.metrics)
    if (sample.name == name && sample.labels == sorted) return &sample;
  return nullptr;
}

TEST(Metrics, CounterSumsEveryThreadsShard) {
  Counter bytes{"test.bytes_acked", {{"stream", "12"}}};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      Counter same{"test.bytes_acked", {{"stream", "12"}}};  // another handle on the same metric
      for (int i = 0; i < 100000; ++i) same.add(2);
    });
  for (auto& thread : threads) thread.join();
  bytes.inc();
  const MetricsSnapshot snapshot = metrics::read_own_metrics();
  const MetricSample* sample = find(snapshot, "test.bytes_acked", {{"stream", "12"}});
  ASSERT_NE(sample, nullptr);
  EXPECT_EQ(sample->count, 800001u);
  EXPECT_EQ(sample->kind, format::MetricKind::counter);
}

TEST(Metrics, FinishedThreadsKeepTheirCountsAndGiveBackTheirShards) {
  Counter counter{"test.thread_churn"};
  for (int round = 0; round < 300; ++round) std::thread([&] { counter.add(3); }).join();
  const MetricsSnapshot snapshot = metrics::read_own_metrics();
  EXPECT_EQ(find(snapshot, "test.thread_churn")->count, 900u);
  EXPECT_LT(snapshot.threads, format::kMaxMetricShards) << "shards of finished threads are reused";
}

TEST(Metrics, GaugeHoldsOneValueForAllThreads) {
  Gauge depth{"test.queue_depth", {{"pool", "io"}}};
  depth.set(17);
  std::thread([] { Gauge{"test.queue_depth", {{"pool", "io"}}}.add(3); }).join();
  depth.sub(0.5);
  EXPECT_DOUBLE_EQ(depth.value(), 19.5);
  EXPECT_DOUBLE_EQ(find(metrics::read_own_metrics(), "test.queue_depth", {{"pool", "io"}})->value, 19.5);
}

TEST(Metrics, HistogramBucketsSumAndQuantiles) {
  Histogram latency{"test.latency_seconds", {{"customer", "acme"}}, {0.001, 0.01, 0.1}};
  for (double value : {0.0005, 0.005, 0.005, 0.05, 0.5}) latency.observe(value);
  { auto timer = latency.time(); }
  const MetricsSnapshot snapshot = metrics::read_own_metrics();
  const MetricSample* sample = find(snapshot, "test.latency_seconds", {{"customer", "acme"}});
  ASSERT_NE(sample, nullptr);
  EXPECT_EQ(sample->count, 6u);
  EXPECT_EQ(sample->buckets, (std::vector<uint64_t>{2, 2, 1, 1}));  // the timer's tiny value is in the first
  EXPECT_NEAR(sample->sum, 0.5605, 0.01);
  // Ranks: 3 of 6 falls in (0.001, 0.01] with 2 below and 2 inside: halfway.
  EXPECT_NEAR(metrics::quantile(*sample, 0.5), 0.0055, 1e-9);
  EXPECT_DOUBLE_EQ(metrics::quantile(*sample, 1.0), 0.1);  // above the last bound: the bound
}

TEST(Metrics, RefusesBadNamesAndLabels) {
  EXPECT_THROW(Counter{"9lives"}, std::invalid_argument);
  EXPECT_THROW((Counter{"ok", {{"bad-label", "x"}}}), std::invalid_argument);
  EXPECT_THROW((Counter{"ok", {{"a", "1"}, {"a", "2"}}}), std::invalid_argument);
  EXPECT_THROW((Histogram{"test.bad_bounds", {}, {1.0, 0.5}}), std::invalid_argument);
  Counter counter{"test.kind_clash"};
  EXPECT_THROW(Gauge{"test.kind_clash"}, std::invalid_argument);
}

TEST(Metrics, AnotherProcessReadsTheMappingFile) {
  Counter counter{"test.from_outside"};
  counter.add(41);
  CHRONICLE_METRIC_ADD("test.macro_counter", 2);
  const std::string path = metrics::MetricsMapping::path_for(getpid());
  EXPECT_EQ(path, metrics_path());
  metrics::MetricsMapping mapping(path);
  EXPECT_TRUE(mapping.writer_alive());
  const MetricsSnapshot snapshot = mapping.read();
  EXPECT_EQ(snapshot.pid, getpid());
  EXPECT_EQ(find(snapshot, "test.from_outside")->count, 41u);
  EXPECT_EQ(find(snapshot, "test.macro_counter")->count, 2u);
}

TEST(Metrics, AForkedChildCountsInAFileOfItsOwn) {
  Counter counter{"test.forked"};
  counter.add(7);
  const pid_t child = fork();
  if (child == 0) {
    counter.add(5);
    Counter{"test.forked_child_only"}.inc();  // a slow path: the child's own file appears
    const MetricsSnapshot snapshot = metrics::read_own_metrics();
    const MetricSample* sample = find(snapshot, "test.forked");
    const bool ok = snapshot.pid == getpid() && sample && sample->count == 12 &&
                    metrics_path() == metrics::MetricsMapping::path_for(getpid());
    ::unlink(metrics_path().c_str());
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const MetricsSnapshot snapshot = metrics::read_own_metrics();
  EXPECT_EQ(find(snapshot, "test.forked")->count, 7u);
  EXPECT_EQ(snapshot.pid, getpid());
}

MetricsSnapshot hierarchy() {
  MetricsSnapshot snapshot;
  auto add = [&](std::string pool, std::string customer, std::string vm, std::string stream, double value) {
    MetricSample sample;
    sample.name = "requests";
    sample.labels = {{"customer", customer}, {"pool", pool}, {"stream", stream}, {"vm", vm}};
    sample.value = value;
    sample.count = static_cast<uint64_t>(value);
    snapshot.metrics.push_back(sample);
  };
  add("p1", "acme", "vm1", "s1", 10);
  add("p1", "acme", "vm1", "s2", 20);
  add("p1", "acme", "vm2", "s3", 5);
  add("p1", "globex", "vm3", "s4", 7);
  add("p2", "initech", "vm4", "s5", 100);
  return snapshot;
}

TEST(MetricsQuery, AggregatesByAnyLabels) {
  const MetricsSnapshot snapshot = hierarchy();
  const auto all = metrics::select(snapshot, "requests");
  const auto total = metrics::aggregate(all, {}, metrics::Aggregation::sum);
  ASSERT_EQ(total.size(), 1u);
  EXPECT_EQ(total[0].value, 142);
  const auto by_pool = metrics::aggregate(all, {"pool"}, metrics::Aggregation::sum);
  ASSERT_EQ(by_pool.size(), 2u);
  EXPECT_EQ(by_pool[0].labels, (metrics::LabelList{{"pool", "p1"}}));
  EXPECT_EQ(by_pool[0].value, 42);
  EXPECT_EQ(by_pool[1].value, 100);
  EXPECT_EQ(metrics::aggregate(all, {"pool"}, metrics::Aggregation::max)[0].value, 20);
  EXPECT_EQ(metrics::aggregate(all, {"pool"}, metrics::Aggregation::avg)[0].value, 10.5);
  EXPECT_EQ(metrics::aggregate(all, {"pool"}, metrics::Aggregation::count)[0].value, 4);
  EXPECT_EQ(metrics::aggregate(all, {"pool"}, metrics::Aggregation::min)[0].value, 5);
}

TEST(MetricsQuery, DrillsDownFromATotalToWhatMadeIt) {
  const MetricsSnapshot snapshot = hierarchy();
  const auto customers = metrics::drill_down(snapshot, "requests", {{"pool", "p1"}}, "customer");
  ASSERT_EQ(customers.size(), 2u);
  EXPECT_EQ(customers[0].labels, (metrics::LabelList{{"pool", "p1"}, {"customer", "acme"}}));
  EXPECT_EQ(customers[0].value, 35);
  EXPECT_EQ(customers[1].value, 7);
  const auto vms = metrics::drill_down(snapshot, "requests", {{"pool", "p1"}, {"customer", "acme"}}, "vm");
  ASSERT_EQ(vms.size(), 2u);
  EXPECT_EQ(vms[0].value, 30);
  EXPECT_EQ(vms[1].value, 5);
  const auto streams =
      metrics::drill_down(snapshot, "requests", {{"pool", "p1"}, {"customer", "acme"}, {"vm", "vm1"}}, "stream");
  ASSERT_EQ(streams.size(), 2u);
  EXPECT_EQ(streams[0].value + streams[1].value, 30);
}

TEST(MetricsQuery, RatesBetweenSnapshots) {
  MetricsSnapshot before = hierarchy();
  MetricsSnapshot after = hierarchy();
  before.monotonic_ns = 1'000'000'000;
  after.monotonic_ns = 3'000'000'000;
  for (auto& sample : after.metrics) sample.value += 10;
  const auto per_second = metrics::rates(before, after, "requests", {{"pool", "p2"}});
  ASSERT_EQ(per_second.size(), 1u);
  EXPECT_DOUBLE_EQ(per_second[0].value, 5);
}

TEST(MetricsExposition, OpenMetricsText) {
  MetricsSnapshot snapshot;
  MetricSample counter;
  counter.name = "tcp.bytes_acked";
  counter.labels = {{"stream", "1\"2"}};
  counter.count = 4096;
  counter.value = 4096;
  MetricSample histogram;
  histogram.name = "rpc.latency_seconds";
  histogram.kind = format::MetricKind::histogram;
  histogram.bounds = {0.01, 1};
  histogram.buckets = {3, 1, 1};
  histogram.count = 5;
  histogram.sum = 2.5;
  MetricSample gauge;
  gauge.name = "disk.free_bytes";
  gauge.kind = format::MetricKind::gauge;
  gauge.value = 1.5e9;
  snapshot.metrics = {counter, histogram, gauge};
  EXPECT_EQ(metrics::expose(snapshot, metrics::TextFormat::openmetrics),
            "# HELP tcp_bytes_acked chronicle counter tcp.bytes_acked\n"
            "# TYPE tcp_bytes_acked counter\n"
            "tcp_bytes_acked_total{stream=\"1\\\"2\"} 4096\n"
            "# HELP rpc_latency_seconds chronicle histogram rpc.latency_seconds\n"
            "# TYPE rpc_latency_seconds histogram\n"
            "rpc_latency_seconds_bucket{le=\"0.01\"} 3\n"
            "rpc_latency_seconds_bucket{le=\"1.0\"} 4\n"
            "rpc_latency_seconds_bucket{le=\"+Inf\"} 5\n"
            "rpc_latency_seconds_sum 2.5\n"
            "rpc_latency_seconds_count 5\n"
            "# HELP disk_free_bytes chronicle gauge disk.free_bytes\n"
            "# TYPE disk_free_bytes gauge\n"
            "disk_free_bytes 1500000000\n"
            "# EOF\n");
  const std::string prometheus = metrics::expose(snapshot, metrics::TextFormat::prometheus);
  EXPECT_NE(prometheus.find("# TYPE tcp_bytes_acked_total counter\n"), std::string::npos);
  EXPECT_EQ(prometheus.find("# EOF"), std::string::npos);
}

TEST(MetricsTracing, ChangesAreTraceEventsWhileASessionRuns) {
  test::TemporaryDirectory directory;
  Counter acked{"test.traced_bytes", {{"stream", "7"}}};
  Gauge depth{"test.traced_depth"};
  Histogram latency{"test.traced_latency"};
  acked.add(5);  // before the session: counted, not traced
  Config config;
  config.output = directory / "trace";
  ASSERT_TRUE(start(config)) << last_error();
  acked.add(10);
  acked.add(20);
  depth.set(3);
  latency.observe(0.25);
  stop();
  reader::Trace trace(directory / "trace");
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, format::SiteKind> kinds;
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (!site) return true;
    kinds[site->name] = site->kind;
    values[site->name].push_back(event.type == format::EventId::counter ? static_cast<double>(event.value)
                                                                        : event.value_float);
    return true;
  });
  EXPECT_EQ(values["test.traced_bytes{stream=\"7\"}"], (std::vector<double>{10, 20}));
  EXPECT_EQ(kinds["test.traced_bytes{stream=\"7\"}"], format::SiteKind::metric_counter);
  EXPECT_EQ(values["test.traced_depth"], (std::vector<double>{3}));
  EXPECT_EQ(kinds["test.traced_depth"], format::SiteKind::metric_gauge);
  EXPECT_EQ(values["test.traced_latency"], (std::vector<double>{0.25}));
  EXPECT_EQ(kinds["test.traced_latency"], format::SiteKind::metric_histogram);
  EXPECT_EQ(find(metrics::read_own_metrics(), "test.traced_bytes", {{"stream", "7"}})->count, 35u);

  const analysis::CounterWindows windows(trace);
  const analysis::CounterSeries* bytes = nullptr;
  for (const auto& series : windows.series())
    if (series.label() == "test.traced_bytes{stream=\"7\"}") bytes = &series;
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->kind(), analysis::SeriesKind::increments);
  const auto whole = bytes->window(windows.first_ns(), windows.last_ns());
  EXPECT_EQ(whole.samples, 2u);
  EXPECT_EQ(whole.sum, 30);
}

TEST(CounterWindows, PrefixSumsAnswerWindows) {
  const int64_t s = 1'000'000'000;
  analysis::CounterSeries requests("requests", analysis::SeriesKind::increments);
  for (int second = 0; second < 600; ++second) requests.add(second * s, 2);  // 2 per second for 10 minutes
  const auto last5 = requests.window(300 * s, 599 * s);
  EXPECT_EQ(last5.samples, 300u);
  EXPECT_EQ(last5.sum, 600);
  EXPECT_NEAR(last5.rate_per_second, 2, 0.01);
  EXPECT_EQ(requests.window(0, 599 * s).last, 1200);
  EXPECT_EQ(requests.window(100 * s, 100 * s).sum, 2);  // closed at both ends

  analysis::CounterSeries depth("depth", analysis::SeriesKind::level);
  depth.add(0, 10);       // 10 for 10 s
  depth.add(10 * s, 30);  // 30 for 10 s
  depth.add(20 * s, 0);
  const auto both = depth.window(0, 20 * s);
  EXPECT_DOUBLE_EQ(both.time_average, 20);
  EXPECT_DOUBLE_EQ(both.mean, 40.0 / 3);
  EXPECT_DOUBLE_EQ(depth.window(5 * s, 15 * s).time_average, 20);
  EXPECT_DOUBLE_EQ(depth.window(12 * s, 14 * s).time_average, 30);
  EXPECT_EQ(depth.window(12 * s, 14 * s).samples, 0u);
  EXPECT_DOUBLE_EQ(depth.window(12 * s, 14 * s).last, 30);
}

// A full registry hands out inert handles: a histogram that found no room must not write into
// the cells of metrics that did, and the refusals are counted where Prometheus and people see
// them. Filled in a forked child, so that this process's registry keeps room for other tests.
TEST(Metrics, HandlesBeyondAFullRegistryAreInertAndCounted) {
  int to_child[2];
  int from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(to_child[1]);
    close(from_child[0]);
    char byte = 0;
    Counter first{"overflow.first"};
    first.add(5);
    for (uint32_t i = 0; i < format::kMaxMetrics; ++i) Counter{"overflow.filler", {{"i", std::to_string(i)}}}.inc();
    (void)!write(from_child[1], "f", 1);  // full
    (void)!read(to_child[0], &byte, 1);
    Histogram late{"overflow.late_seconds", {}, {0.1, 1.0}};
    for (double seconds : {0.05, 0.5, 5.0}) late.observe(seconds);
    (void)!write(from_child[1], "o", 1);  // observed
    (void)!read(to_child[0], &byte, 1);
    _exit(0);
  }
  close(to_child[0]);
  close(from_child[1]);
  char byte = 0;
  ASSERT_EQ(read(from_child[0], &byte, 1), 1);
  metrics::MetricsMapping mapping(metrics::MetricsMapping::path_for(child));
  const MetricsSnapshot full = mapping.read();
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  ASSERT_EQ(read(from_child[0], &byte, 1), 1);
  const MetricsSnapshot after = mapping.read();
  const auto shown = test::run(std::string(CHRONICLE_CLI) + " metrics show " + std::to_string(child));
  close(to_child[1]);
  waitpid(child, nullptr, 0);
  // The child left by _exit, which runs no atexit: its mapping's file is this test's to remove.
  ::unlink(metrics::MetricsMapping::path_for(child).c_str());

  ASSERT_NE(find(after, "overflow.first"), nullptr);
  EXPECT_EQ(find(after, "overflow.first")->count, 5u);
  EXPECT_EQ(find(after, "overflow.late_seconds"), nullptr);
  ASSERT_EQ(after.metrics.size(), full.metrics.size());
  for (size_t i = 0; i < after.metrics.size(); ++i) {
    EXPECT_EQ(after.metrics[i].count, full.metrics[i].count) << after.metrics[i].name;
    EXPECT_EQ(after.metrics[i].buckets, full.metrics[i].buckets) << after.metrics[i].name;
  }
  EXPECT_GT(after.dropped, 0u);
  EXPECT_NE(metrics::expose(after, metrics::TextFormat::openmetrics).find("\nchronicle_metrics_dropped_total "),
            std::string::npos);
  EXPECT_NE(metrics::expose(after, metrics::TextFormat::prometheus).find("\nchronicle_metrics_dropped_total "),
            std::string::npos);
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("\nchronicle_metrics_dropped_total "), std::string::npos);
}

TEST(MetricsHttp, AScrapeIsAnsweredWhileManyIdleConnectionsAreOpen) {
  metrics::MetricsHttpServer server([] { return MetricsSnapshot{}; }, "127.0.0.1", 0);
  constexpr int kIdleConnections = 64;
  std::vector<int> idle;
  for (int i = 0; i < kIdleConnections; ++i)
    if (const int fd = test::open_idle_connection(server.port()); fd >= 0) idle.push_back(fd);
  EXPECT_EQ(idle.size(), size_t{kIdleConnections});

  // Generous limits: the scrape must be answered, however slow the machine; hanging behind the
  // idle connections until the test's own timeout is the failure.
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(std::chrono::seconds(20));
  client.set_read_timeout(std::chrono::seconds(20));
  const httplib::Result scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape) << "no answer: " << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
  for (const int fd : idle) ::close(fd);
}

// More slowloris connections than the server has workers, each sending a header byte a second
// (under the per-read timeout), and idle ones besides: a scrape must still be answered.
TEST(MetricsHttp, AScrapeIsAnsweredWhileSlowClientsTrickleTheirHeaders) {
  metrics::MetricsHttpServer server([] { return MetricsSnapshot{}; }, "127.0.0.1", 0);
  const httplib::Result scrape = test::get_while_starved(server.port(), "/metrics");
  ASSERT_TRUE(scrape) << "no answer: " << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
}

// A bounded server with small caps, listening on 127.0.0.1; peers differ by source address.
class SmallCaps : public ::testing::Test {
 protected:
  void start(metrics::HttpLimits limits) {
    server_ = std::make_unique<metrics::BoundedHttpServer>(limits);
    server_->Get("/metrics",
                 [](const httplib::Request&, httplib::Response& answer) { answer.set_content("ok", "text/plain"); });
    port_ = static_cast<uint16_t>(server_->bind_to_any_port("127.0.0.1"));
    ASSERT_GT(port_, 0);
    listening_ = std::thread([this] { server_->listen_after_bind(); });
  }
  void TearDown() override {
    for (const int fd : open_) ::close(fd);
    if (!server_) return;
    server_->stop();
    listening_.join();
  }
  // A connection from `source` (another loopback address) that sent half a request head.
  int connect_from(const char* source) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &address.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
    address.sin_port = htons(port_);
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
    EXPECT_GT(::send(fd, "GET /metr", 9, MSG_NOSIGNAL), 0);
    open_.push_back(fd);
    return fd;
  }
  // Whether the server closed `fd` within a generous limit (it sent nothing: a closed connection
  // reads as end of file or a reset).
  static bool closed_by_server(int fd) {
    pollfd polled{fd, POLLIN, 0};
    if (::poll(&polled, 1, 60'000) != 1) return false;
    char byte;
    return ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
  }
  // Finishes the request begun on `fd`: true when it is answered 200.
  static bool answered(int fd) {
    const std::string rest = "ics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    if (::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(rest.size())) return false;
    std::string reply;
    char buffer[512];
    pollfd polled{fd, POLLIN, 0};
    while (::poll(&polled, 1, 60'000) == 1) {
      const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) break;
      reply.append(buffer, static_cast<size_t>(got));
    }
    return reply.starts_with("HTTP/1.1 200");
  }
  std::unique_ptr<metrics::BoundedHttpServer> server_;
  uint16_t port_ = 0;
  std::thread listening_;
  std::vector<int> open_;
};

// Past a peer's cap, its oldest connection still waiting for a head is closed; past the cap in
// all, the oldest of any peer. Every connection left is answered (src/http/http_limits.hpp).
TEST_F(SmallCaps, AConnectionPastACapClosesTheOldestStillWaitingForItsHead) {
  start({.head_timeout = std::chrono::minutes(10), .max_connections = 4, .max_connections_per_peer = 2});
  const int a1 = connect_from("127.0.0.2");
  const int a2 = connect_from("127.0.0.2");
  const int a3 = connect_from("127.0.0.2");
  EXPECT_TRUE(closed_by_server(a1)) << "a peer's third connection with a cap of two";
  const int b1 = connect_from("127.0.0.3");
  const int b2 = connect_from("127.0.0.3");
  const int c1 = connect_from("127.0.0.4");
  EXPECT_TRUE(closed_by_server(a2)) << "a fifth connection with a cap of four";
  for (const int fd : {a3, b1, b2, c1}) EXPECT_TRUE(answered(fd)) << "connection " << fd;
}

// The head of a request must be whole by its deadline: a connection that stops halfway is
// closed by the server, not left open until its client goes.
TEST_F(SmallCaps, AHeadNotWholeByItsDeadlineClosesItsConnection) {
  start({.head_timeout = std::chrono::milliseconds(200)});
  EXPECT_TRUE(closed_by_server(connect_from("127.0.0.2")));
}

TEST(CounterWindows, ParsesDurationsAndTimes) {
  EXPECT_EQ(analysis::parse_duration("5m"), 300'000'000'000);
  EXPECT_EQ(analysis::parse_duration("250ms"), 250'000'000);
  EXPECT_EQ(analysis::parse_duration("1.5s"), 1'500'000'000);
  EXPECT_EQ(analysis::parse_duration("2"), 2'000'000'000);
  EXPECT_THROW(analysis::parse_duration("fast"), std::invalid_argument);
  EXPECT_EQ(analysis::parse_time_point("+2s", 1000, 9000), 2'000'001'000);
  EXPECT_EQ(analysis::parse_time_point("-1us", 1000, 9000), 8000);
  EXPECT_EQ(analysis::parse_time_point("2024-05-01T12:00:00.25Z", 0, 0), 1714564800'250'000'000);
  EXPECT_EQ(analysis::parse_time_point("2024-05-01 12:00:00", 0, 0), 1714564800'000'000'000);
  EXPECT_THROW(analysis::parse_time_point("yesterday", 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace chronicle
