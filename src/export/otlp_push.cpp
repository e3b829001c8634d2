#include "export/otlp_push.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

namespace chronicle::exports {

namespace {

struct Endpoint {
  std::string scheme_host_port;  // http://HOST:PORT
  std::string path;              // .../v1/traces
};

Endpoint parse_endpoint(const std::string& endpoint, bool whole_url) {
  constexpr std::string_view kScheme = "http://";
  if (endpoint.starts_with("https://"))
    throw std::invalid_argument(fmt::format(
        "{}: https is not supported (this build has no TLS): use http:// to a collector or a TLS-terminating proxy",
        endpoint));
  if (!endpoint.starts_with(kScheme))
    throw std::invalid_argument(fmt::format("{}: the endpoint must be a URL http://HOST[:PORT][/PATH]", endpoint));
  const size_t path_start = endpoint.find('/', kScheme.size());
  Endpoint result;
  result.scheme_host_port = endpoint.substr(0, path_start);
  if (result.scheme_host_port.size() == kScheme.size())
    throw std::invalid_argument(fmt::format("{}: the endpoint has no host", endpoint));
  std::string path = path_start == std::string::npos ? "" : endpoint.substr(path_start);
  while (!path.empty() && path.back() == '/') path.pop_back();
  // As the OTLP/HTTP exporter specification says for OTEL_EXPORTER_OTLP_ENDPOINT: the signal's
  // path is appended to a base URL; a URL that already names it is taken as it is.
  // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the whole URL, used as it is.
  if (!whole_url && !path.ends_with("/v1/traces")) path += "/v1/traces";
  if (path.empty()) path = "/";
  result.path = path;
  return result;
}

// --- the spool: one file per batch, NNNNNNNN-SPANS.pb or .json -------------------------------

struct SpoolFile {
  std::filesystem::path path;
  uint64_t spans = 0;
  OtlpProtocol protocol = OtlpProtocol::http_protobuf;
};

std::string_view spool_extension(OtlpProtocol protocol) {
  return protocol == OtlpProtocol::http_protobuf ? "pb" : "json";
}

std::optional<SpoolFile> read_spool_name(const std::filesystem::path& path, uint64_t* index = nullptr) {
  const std::string name = path.filename().string();
  unsigned long long number = 0, spans = 0;
  char extension[8] = {};
  int consumed = 0;
  if (std::sscanf(name.c_str(), "%8llu-%llu.%4[a-z]%n", &number, &spans, extension, &consumed) != 3 ||
      static_cast<size_t>(consumed) != name.size())
    return std::nullopt;
  const std::string_view ext(extension);
  if (ext != "pb" && ext != "json") return std::nullopt;
  if (index) *index = number;
  return SpoolFile{path, spans, ext == "pb" ? OtlpProtocol::http_protobuf : OtlpProtocol::http_json};
}

std::vector<SpoolFile> list_spool(const std::string& directory) {
  std::vector<SpoolFile> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error))
    if (auto file = read_spool_name(entry.path())) files.push_back(std::move(*file));
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

class Spool {
 public:
  explicit Spool(std::string directory) : directory_(std::move(directory)) {}

  // Writes the batch under the next number; throws std::runtime_error when it cannot.
  void write(const std::string& body, uint64_t spans, OtlpProtocol protocol) {
    namespace fs = std::filesystem;
    if (!next_index_) {
      format::create_private_directory(directory_);
      uint64_t last = 0;
      for (const SpoolFile& file : list_spool(directory_)) read_spool_name(file.path, &last);
      next_index_ = last + 1;
    }
    if (!first_written_) first_written_ = *next_index_;
    const fs::path path =
        fs::path(directory_) / fmt::format("{:08}-{}.{}", (*next_index_)++, spans, spool_extension(protocol));
    // Written aside and renamed (a resend never sees half a batch), private as the trace is.
    format::write_private_file(path.string(), body, format::WhenExists::refuse);
  }

  // The files this spool object wrote (and that are still there), oldest first.
  std::vector<SpoolFile> own_files() const {
    std::vector<SpoolFile> own;
    if (!first_written_) return own;
    for (SpoolFile& file : list_spool(directory_)) {
      uint64_t index = 0;
      read_spool_name(file.path, &index);
      if (index >= *first_written_) own.push_back(std::move(file));
    }
    return own;
  }

 private:
  std::string directory_;
  std::optional<uint64_t> next_index_;
  std::optional<uint64_t> first_written_;
};

// --- sending one batch, with retries ----------------------------------------------------------

enum class Outcome { sent, refused, collector_down };

bool retryable_status(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

// Retry-After as delay-seconds (the form collectors send); an HTTP date is left to the backoff.
std::optional<std::chrono::milliseconds> retry_after(const httplib::Response& response) {
  const std::string value = response.get_header_value("Retry-After");
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      value.size() > 6)
    return std::nullopt;
  return std::chrono::seconds(std::stoll(value));
}

using Clock = std::chrono::steady_clock;

bool cancelled(const OtlpPushOptions& options) {
  return options.cancel && options.cancel->load(std::memory_order_relaxed);
}

// Ends the attempt in flight at its deadline or when the push is cancelled: cpp-httplib's
// timeouts are per read, so an answer trickled a byte at a time would hold an attempt for as
// long as the collector likes. Client::stop() is its way to end a request from another thread;
// it is called again every 50 ms until the attempt returns, in case the first call came between
// two of the request's steps.
class AttemptWatchdog {
 public:
  AttemptWatchdog(httplib::Client& client, const OtlpPushOptions& options) : client_(client), options_(options) {
    thread_ = std::thread([this] { watch(); });
  }
  ~AttemptWatchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  AttemptWatchdog(const AttemptWatchdog&) = delete;
  AttemptWatchdog& operator=(const AttemptWatchdog&) = delete;

  void arm(Clock::time_point deadline) {
    {
      std::lock_guard lock(mutex_);
      deadline_ = deadline;
      armed_ = true;
    }
    wake_.notify_all();
  }
  void disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (!armed_) {
        wake_.wait(lock);
        continue;
      }
      wake_.wait_until(lock, std::min(deadline_, Clock::now() + std::chrono::milliseconds(50)));
      if (armed_ && (Clock::now() >= deadline_ || cancelled(options_))) client_.stop();
    }
  }

  httplib::Client& client_;
  const OtlpPushOptions& options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  Clock::time_point deadline_;
  bool armed_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

// Waits for `delay`, or less when the push is cancelled.
void back_off(const OtlpPushOptions& options, std::chrono::milliseconds delay) {
  const auto until = Clock::now() + delay;
  while (!cancelled(options) && Clock::now() < until)
    std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(50)));
}

class Sender {
 public:
  Sender(const OtlpPushOptions& options, const Endpoint& endpoint)
      : options_(options), path_(endpoint.path), client_(endpoint.scheme_host_port), watchdog_(client_, options) {
    const auto seconds = [](std::chrono::milliseconds ms) {
      return std::pair(ms.count() / 1000, ms.count() % 1000 * 1000);
    };
    const auto [timeout_s, timeout_us] = seconds(options.request_timeout);
    client_.set_connection_timeout(timeout_s, timeout_us);
    client_.set_read_timeout(timeout_s, timeout_us);
    client_.set_write_timeout(timeout_s, timeout_us);
    client_.set_keep_alive(true);
    httplib::Headers headers;
    for (const auto& [key, value] : options.headers) headers.emplace(key, value);
    client_.set_default_headers(std::move(headers));
    client_.set_compress(options.gzip);  // Content-Encoding: gzip
  }

  Outcome send(const std::string& body, OtlpProtocol protocol, uint64_t spans) {
    const auto deadline = Clock::now() + options_.retry_budget;
    auto backoff = options_.first_backoff;
    for (;;) {
      if (cancelled(options_)) {
        last_error = "interrupted by a signal";
        return Outcome::collector_down;
      }
      const auto response = attempt(body, protocol);
      std::optional<std::chrono::milliseconds> wait;
      if (response) {
        if (response->status >= 200 && response->status < 300) {
          accepted(*response, protocol, spans);
          return Outcome::sent;
        }
        last_error = fmt::format("HTTP {}{}{}", response->status, response->body.empty() ? "" : ": ",
                                 response->body.substr(0, 200));
        if (!retryable_status(response->status)) return Outcome::refused;
        wait = retry_after(*response);
      } else {
        last_error = attempt_timed_out_
                         ? fmt::format("no whole answer within the attempt's {} ms", options_.request_timeout.count())
                         : fmt::format("cannot reach the collector ({})", httplib::to_string(response.error()));
      }
      const auto delay = wait.value_or(backoff);
      if (Clock::now() + delay > deadline) return Outcome::collector_down;
      back_off(options_, delay);
      ++retries;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }

  std::string last_error;
  uint64_t retries = 0;
  uint64_t spans_rejected = 0;

 private:
  httplib::Result attempt(const std::string& body, OtlpProtocol protocol) {
    const auto deadline = Clock::now() + options_.request_timeout;
    watchdog_.arm(deadline);
    httplib::Result response = client_.Post(path_, body, std::string(otlp_content_type(protocol)));
    watchdog_.disarm();
    attempt_timed_out_ = !response && Clock::now() >= deadline;
    return response;
  }

  void accepted(const httplib::Response& response, OtlpProtocol protocol, uint64_t spans) {
    const OtlpPartialSuccess partial = parse_otlp_response(protocol, response.body);
    if (partial.rejected_spans <= 0) return;
    spans_rejected += std::min<uint64_t>(static_cast<uint64_t>(partial.rejected_spans), spans);
    last_error = fmt::format("the collector rejected {} spans: {}", partial.rejected_spans, partial.error_message);
  }

  const OtlpPushOptions& options_;
  std::string path_;
  httplib::Client client_;
  AttemptWatchdog watchdog_;
  bool attempt_timed_out_ = false;
};

// --- delivery: send, else spool ---------------------------------------------------------------

class Delivery {
 public:
  Delivery(const OtlpPushOptions& options, const Endpoint& endpoint)
      : sender_(options, endpoint), spool_(options.spool_directory) {}

  // A batch from the trace: sent, else spooled (the first failure past the retry budget makes
  // every later batch go straight to the spool).
  void deliver(const std::string& body, uint64_t spans, OtlpProtocol protocol) {
    if (!collector_down_) {
      const Outcome outcome = sender_.send(body, protocol, spans);
      if (outcome == Outcome::sent) {
        count_sent(spans);
        return;
      }
      collector_down_ = outcome == Outcome::collector_down;
    }
    try {
      spool_.write(body, spans, protocol);
      spans_spooled += spans;
      ++batches_spooled;
    } catch (const std::exception& error) {
      spans_lost += spans;
      spool_error_ = error.what();
    }
  }

  // A spooled batch: sent and deleted, else left where it is.
  void redeliver(const SpoolFile& file) {
    if (!collector_down_) {
      std::ifstream in(file.path, std::ios::binary);
      const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const Outcome outcome = in.bad() ? Outcome::refused : sender_.send(body, file.protocol, file.spans);
      if (outcome == Outcome::sent) {
        std::filesystem::remove(file.path);
        count_sent(file.spans);
        return;
      }
      collector_down_ = outcome == Outcome::collector_down;
    }
    spans_spooled += file.spans;
    ++batches_spooled;
  }

  // After the collector was taken as down: the batches this push spooled since, oldest first,
  // until one fails on the collector again. One it refuses stays in the spool, and is counted so.
  void retry_spooled() {
    if (!collector_down_) return;
    collector_down_ = false;
    for (const SpoolFile& file : spool_.own_files()) {
      if (refused_.count(file.path.string())) continue;
      std::ifstream in(file.path, std::ios::binary);
      const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const Outcome outcome = in.bad() ? Outcome::refused : sender_.send(body, file.protocol, file.spans);
      if (outcome == Outcome::sent) {
        std::error_code ignored;
        std::filesystem::remove(file.path, ignored);
        count_sent(file.spans);
        spans_spooled -= file.spans;
        --batches_spooled;
      } else if (outcome == Outcome::refused) {
        refused_.insert(file.path.string());
      } else {
        collector_down_ = true;
        return;
      }
    }
  }

  void fill(OtlpPushResult& result) const {
    result.spans_sent = spans_sent;
    result.batches_sent = batches_sent;
    result.spans_spooled = spans_spooled;
    result.batches_spooled = batches_spooled;
    result.spans_lost = spans_lost;
    result.spans_rejected = sender_.spans_rejected;
    result.retries = sender_.retries;
    result.last_error = spool_error_.empty() ? sender_.last_error : sender_.last_error + "; " + spool_error_;
  }

  std::atomic<uint64_t> spans_sent{0};
  std::atomic<uint64_t> spans_spooled{0};

 private:
  void count_sent(uint64_t spans) {
    spans_sent += spans;
    ++batches_sent;
  }

  Sender sender_;
  Spool spool_;
  std::set<std::string> refused_;  // spooled batches the collector refused: not tried again
  bool collector_down_ = false;
  uint64_t batches_sent = 0;
  uint64_t batches_spooled = 0;
  uint64_t spans_lost = 0;
  std::string spool_error_;
};

// --- the pipeline: encoded batches through a bounded queue to the sender thread --------------

struct Batch {
  std::string body;
  uint64_t spans = 0;
  bool retry_spool = false;  // not a batch: the sender tries the spooled batches again
};

class BatchQueue {
 public:
  explicit BatchQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}
  void push(Batch batch) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return batches_.size() < capacity_; });
    batches_.push_back(std::move(batch));
    not_empty_.notify_one();
  }
  std::optional<Batch> pop() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !batches_.empty() || closed_; });
    if (batches_.empty()) return std::nullopt;
    Batch batch = std::move(batches_.front());
    batches_.pop_front();
    not_full_.notify_one();
    return batch;
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Batch> batches_;
  bool closed_ = false;
};

// Cuts the producer's spans into requests of at most spans_per_batch spans; a process's spans
// may span several requests, each repeating its resource.
class BatchingSink final : public OtlpSpanSink {
 public:
  BatchingSink(const OtlpPushOptions& options, BatchQueue& queue)
      : encoder_(make_otlp_request_encoder(options.protocol)),
        spans_per_batch_(std::max<size_t>(options.spans_per_batch, 1)),
        queue_(queue) {}

  void begin_resource(const OtlpResource& resource) override { resource_ = resource; }
  void span(const OtlpSpan& span) override {
    if (!resource_open_) {
      encoder_->begin_resource(resource_);
      resource_open_ = true;
    }
    encoder_->add_span(span);
    ++produced;
    if (++spans_ == spans_per_batch_) flush();
  }
  void end_resource() override {
    if (resource_open_) encoder_->end_resource();
    resource_open_ = false;
  }
  void flush() {
    end_resource();
    if (spans_ == 0) return;
    queue_.push(Batch{encoder_->finish(), spans_});
    spans_ = 0;
  }

  uint64_t produced = 0;

 private:
  std::unique_ptr<OtlpRequestEncoder> encoder_;
  const size_t spans_per_batch_;
  BatchQueue& queue_;
  OtlpResource resource_;
  bool resource_open_ = false;
  uint64_t spans_ = 0;
};

}  // namespace

std::string otlp_traces_url(const std::string& endpoint, bool whole_url) {
  const Endpoint parsed = parse_endpoint(endpoint, whole_url);
  return parsed.scheme_host_port + parsed.path;
}

OtlpPushResult push_otlp(const std::vector<reader::Trace>& traces, const OtlpPushOptions& options) {
  const Endpoint endpoint = parse_endpoint(options.endpoint, options.endpoint_is_traces_url);
  Delivery delivery(options, endpoint);
  BatchQueue queue(options.queued_batches);
  BatchingSink sink(options, queue);
  std::thread sender([&] {
    while (auto batch = queue.pop()) delivery.deliver(batch->body, batch->spans, options.protocol);
  });

  ExportOptions export_options;
  if (options.on_progress)
    export_options.on_progress = [&](uint64_t events) {
      options.on_progress({events, sink.produced, delivery.spans_sent.load(), delivery.spans_spooled.load()});
    };
  ProgressCounter progress(export_options);
  OtlpPushResult result;
  try {
    produce_otlp_spans(traces, sink, progress);
  } catch (...) {
    result.read_failure = std::current_exception();
  }
  // What was read before a failure is still delivered (or spooled): nothing read is dropped.
  sink.flush();
  queue.close();
  sender.join();

  result.url = endpoint.scheme_host_port + endpoint.path;
  result.spans_produced = sink.produced;
  delivery.fill(result);
  if (options.on_progress)
    options.on_progress({progress.events(), result.spans_produced, result.spans_sent, result.spans_spooled});
  return result;
}

struct OtlpPushSession::State {
  explicit State(const OtlpPushOptions& given)
      : options(given),
        endpoint(parse_endpoint(options.endpoint, options.endpoint_is_traces_url)),
        delivery(options, endpoint),
        queue(options.queued_batches),
        sink(options, queue) {
    sender = std::thread([this] {
      while (auto batch = queue.pop()) {
        if (batch->retry_spool)
          delivery.retry_spooled();
        else
          delivery.deliver(batch->body, batch->spans, options.protocol);
      }
    });
  }
  void stop() {
    if (!sender.joinable()) return;
    sink.flush();
    queue.close();
    sender.join();
  }

  const OtlpPushOptions options;
  const Endpoint endpoint;
  Delivery delivery;
  BatchQueue queue;
  BatchingSink sink;
  std::thread sender;
};

OtlpPushSession::OtlpPushSession(const OtlpPushOptions& options) : state_(std::make_unique<State>(options)) {}

OtlpPushSession::~OtlpPushSession() {
  state_->stop();
}

OtlpSpanSink& OtlpPushSession::sink() {
  return state_->sink;
}

void OtlpPushSession::flush() {
  state_->sink.flush();
}

void OtlpPushSession::retry_spool() {
  Batch marker;
  marker.retry_spool = true;
  state_->queue.push(std::move(marker));
}

OtlpPushResult OtlpPushSession::finish() {
  state_->stop();
  OtlpPushResult result;
  result.url = state_->endpoint.scheme_host_port + state_->endpoint.path;
  result.spans_produced = state_->sink.produced;
  state_->delivery.fill(result);
  return result;
}

OtlpPushResult resend_otlp_spool(const OtlpPushOptions& options) {
  const Endpoint endpoint = parse_endpoint(options.endpoint, options.endpoint_is_traces_url);
  if (!std::filesystem::is_directory(options.spool_directory))
    throw std::invalid_argument(fmt::format("{}: no such spool directory", options.spool_directory));
  Delivery delivery(options, endpoint);
  OtlpPushResult result;
  for (const SpoolFile& file : list_spool(options.spool_directory)) {
    result.spans_produced += file.spans;
    delivery.redeliver(file);
    if (options.on_progress)
      options.on_progress({0, result.spans_produced, delivery.spans_sent.load(), delivery.spans_spooled.load()});
  }
  result.url = endpoint.scheme_host_port + endpoint.path;
  delivery.fill(result);
  return result;
}

}  // namespace chronicle::exports
