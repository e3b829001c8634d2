#include "export/otlp_live.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <queue>

namespace chronicle::exports {

namespace {

// One spelling per directory, whoever names it (the collector, open_traces).
std::string directory_key(const std::string& directory) {
  std::string key = std::filesystem::path(directory).lexically_normal().string();
  while (key.size() > 1 && key.back() == '/') key.pop_back();
  return key;
}

// A stream is the same from chunk to chunk: its files have one name.
std::string stream_key(const reader::StreamInfo& stream) {
  return std::filesystem::path(stream.path).filename().string();
}

}  // namespace

OtlpLiveTrace::OtlpLiveTrace(std::string directory)
    : directory_(std::move(directory)), producer_(std::make_unique<OtlpLiveSpanProducer>()) {}

OtlpLiveTrace::~OtlpLiveTrace() = default;

// Where each stream's reading goes on: the file and packet the last round stopped in.
std::map<std::string, uint64_t> OtlpLiveTrace::starts() const {
  std::map<std::string, uint64_t> starts;
  for (const auto& [stream, position] : positions_)
    if (!position.path.empty()) starts[position.path] = position.packet_offset;
  return starts;
}

void OtlpLiveTrace::advance(uint64_t complete_below, const reader::CommittedFiles& committed, OtlpSpanSink& sink) {
  auto round = std::make_unique<reader::Trace>(directory_, starts(), committed);
  producer_->begin_round(*round, sink);
  read_events(*round, complete_below, nullptr);
  read_below_ = std::max(read_below_, complete_below);
  producer_->end_round();
  round_ = std::move(round);
}

void OtlpLiveTrace::finish(const reader::Trace& trace, OtlpSpanSink& sink, ProgressCounter& progress) {
  round_.reset();  // its mappings go before the whole trace is read again
  const model::TaskGraph graph = build_task_graph(trace, progress);
  // The rest as the finished trace has it: the events from the positions reached, named with
  // the finished trace's sites (the rest's are the same, as the files are).
  const reader::Trace rest(directory_, starts());
  producer_->begin_round(trace, sink);
  read_events(rest, std::numeric_limits<uint64_t>::max(), &progress);
  producer_->finish(graph);
}

// The events of `round` older than `complete_below`, merged in time order as
// Trace::for_each_event merges them (ties: stream order, which is the files' name order in
// every reading), skipping those earlier rounds read.
void OtlpLiveTrace::read_events(const reader::Trace& round, uint64_t complete_below, ProgressCounter* progress) {
  const size_t streams = round.streams().size();
  std::vector<reader::Trace::StreamCursor> cursors;
  std::vector<reader::Event> current(streams);
  std::vector<Position*> positions(streams);
  cursors.reserve(streams);
  struct Head {
    uint64_t ticks;
    size_t stream;
  };
  auto later = [](const Head& a, const Head& b) {
    return a.ticks != b.ticks ? a.ticks > b.ticks : a.stream > b.stream;
  };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (size_t i = 0; i < streams; ++i) {
    cursors.emplace_back(round, i);
    positions[i] = &positions_[stream_key(round.streams()[i])];
    // The first packet is the one the last round stopped in: its events read then are skipped.
    // (Where its file was removed since, the reading goes on in the stream's next file.)
    bool more = cursors[i].next(current[i]);
    for (uint64_t skip = positions[i]->events_read;
         more && skip > 0 && cursors[i].packet_offset() == positions[i]->packet_offset &&
         cursors[i].packet_path() == positions[i]->path;
         --skip)
      more = cursors[i].next(current[i]);
    if (more) heads.push({current[i].ticks, i});
  }
  while (!heads.empty() && heads.top().ticks < complete_below) {
    const size_t stream = heads.top().stream;
    heads.pop();
    reader::Event& event = current[stream];
    Position& position = *positions[stream];
    const uint64_t packet = cursors[stream].packet_offset();
    if (packet != position.packet_offset || cursors[stream].packet_path() != position.path)
      position = {cursors[stream].packet_path(), packet, 0};
    ++position.events_read;
    ++events_read_;
    if (event.ticks < read_below_) ++late_events_;
    if (progress) progress->count();
    producer_->follow(event);
    if (cursors[stream].next(current[stream])) heads.push({current[stream].ticks, stream});
  }
}

OtlpLivePush::OtlpLivePush(const OtlpPushOptions& options, std::chrono::milliseconds interval)
    : options_(options), interval_(interval), session_(std::make_unique<OtlpPushSession>(options_)) {
  thread_ = std::thread([this] { run(); });
}

OtlpLivePush::~OtlpLivePush() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OtlpLivePush::publish(const std::string& directory, uint64_t complete_below, reader::CommittedFiles committed) {
  if (complete_below == 0) return;
  std::lock_guard lock(mutex_);
  published_[directory_key(directory)] = {complete_below, std::move(committed)};
}

void OtlpLivePush::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    round();
    lock.lock();
  }
}

// One round: each trace as far as its collector said it is complete. A trace that cannot be
// read is left to the end, which reads it whole and says what is wrong.
void OtlpLivePush::round() {
  std::map<std::string, Published> published;
  {
    std::lock_guard lock(mutex_);
    published = published_;
  }
  for (const auto& [directory, bounds] : published) {
    if (read_failure_) break;
    try {
      trace_for(directory).advance(bounds.complete_below, bounds.committed, session_->sink());
    } catch (...) {
      read_failure_ = std::current_exception();
    }
  }
  session_->flush();
  session_->retry_spool();
}

OtlpLiveTrace& OtlpLivePush::trace_for(const std::string& directory) {
  auto& trace = traces_[directory];
  if (!trace) trace = std::make_unique<OtlpLiveTrace>(directory);
  return *trace;
}

uint64_t OtlpLivePush::events_read() const {
  uint64_t events = 0;
  for (const auto& [directory, trace] : traces_) events += trace->events_read();
  return events;
}

uint64_t OtlpLivePush::late_events() const {
  uint64_t events = 0;
  for (const auto& [directory, trace] : traces_) events += trace->late_events();
  return events;
}

OtlpPushResult OtlpLivePush::finish(const std::vector<reader::Trace>& traces) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::exception_ptr read_failure = read_failure_;
  if (!read_failure) {
    try {
      const ExportOptions export_options;
      ProgressCounter progress(export_options);
      for (const reader::Trace& trace : traces)
        trace_for(directory_key(trace.directory())).finish(trace, session_->sink(), progress);
    } catch (...) {
      read_failure = std::current_exception();
    }
  }
  session_->retry_spool();
  OtlpPushResult result = session_->finish();
  result.read_failure = read_failure;
  return result;
}

}  // namespace chronicle::exports
