// OTLP push while a program runs (`chronicle record --otlp-endpoint`): every interval, the spans
// that have ended in the trace files so far are pushed; at the end, the rest. Together, the
// rounds push exactly the spans `export --otlp-endpoint` pushes from the finished trace, each
// once, with the same ids and parents.
//
// The collector stays the only writer of the trace; this reads what it has written. Span ids
// follow the order of the events in time across the threads (reader::SpanPairing), so a round
// reads only the events older than the trace's "complete below" time, which the collector
// publishes after each drain (collector::Collector::complete_below): no event older than it can
// still come. A round carries on from where the previous one stopped (per stream file, a packet
// and the events read in it) with the pairing of the spans still open: the state grows with the
// spans and tasks open, the threads and the messages sent, not with the spans already pushed.
//
// The same in compressed files (the collector's complete_below leaves out what it still holds in
// units not yet written) and in rotated traces (each stream followed from chunk to chunk). What
// --max-size removes before a round comes to it is not read: record counts those events.
//
// Thread spans go out live as they end (a child may go before its parent, which goes later: no
// parent dangles); a receive whose send this export has not seen yet, and every task's span,
// go at the end, when the task graph is whole.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "export/otlp_push.hpp"
#include "export/otlp_spans.hpp"

namespace chronicle::exports {

// One trace directory read in rounds while its collector writes it.
class OtlpLiveTrace {
 public:
  explicit OtlpLiveTrace(std::string directory);
  ~OtlpLiveTrace();
  OtlpLiveTrace(const OtlpLiveTrace&) = delete;
  OtlpLiveTrace& operator=(const OtlpLiveTrace&) = delete;

  // Hands `sink` the spans that ended among the events older than `complete_below` (ticks) not
  // read yet. Throws reader::TraceError.
  // `committed`: what the collector has written whole. A stream is followed from file to file
  // (chunk to chunk): what --max-size removed before a round came to it is not read.
  void advance(uint64_t complete_below, const reader::CommittedFiles& committed, OtlpSpanSink& sink);

  // The end: the rest of the events (`trace` is this directory, finished), the spans still open,
  // then one span per task.
  void finish(const reader::Trace& trace, OtlpSpanSink& sink, ProgressCounter& progress);

  uint64_t events_read() const { return events_read_; }
  // Events read after a round had passed their time: they came into the files after the
  // collector said the trace was complete past them (a thread stopped inside a trace point for
  // longer than the push interval, Collector::complete_bound). Their spans went late, and a span
  // paired across threads with one of them may have gone unpaired.
  uint64_t late_events() const { return late_events_; }

 private:
  struct Position {
    std::string path;            // the stream's file (of its chunk) being read; "" before any
    uint64_t packet_offset = 0;  // the packet of the next event to read
    uint64_t events_read = 0;    // events of that packet already read
  };
  std::map<std::string, uint64_t> starts() const;
  void read_events(const reader::Trace& trace, uint64_t complete_below, ProgressCounter* progress);

  std::string directory_;
  std::map<std::string, Position> positions_;  // by stream: its files' name in every chunk
  std::unique_ptr<OtlpLiveSpanProducer> producer_;
  std::unique_ptr<reader::Trace> round_;  // the last round's view of the files (the producer points into it)
  uint64_t events_read_ = 0;
  uint64_t read_below_ = 0;  // the rounds have read every event older than this
  uint64_t late_events_ = 0;
};

// The pusher thread of `record`: rounds every `interval` over the traces the collectors said
// are complete up to a time, one push session (batches, retries, spool) for the whole run.
class OtlpLivePush {
 public:
  OtlpLivePush(const OtlpPushOptions& options, std::chrono::milliseconds interval);
  ~OtlpLivePush();
  OtlpLivePush(const OtlpLivePush&) = delete;
  OtlpLivePush& operator=(const OtlpLivePush&) = delete;

  // From the collecting thread, after a drain: every event of `directory` older than
  // `complete_below` is in its files, within `committed` (Collector::committed_sizes and
  // writing_chunk). Takes a lock for a map update, nothing more.
  void publish(const std::string& directory, uint64_t complete_below, reader::CommittedFiles committed);

  // Stops the rounds and pushes the rest of `traces` (the run's traces, finished, as
  // open_traces reads them), then waits for the sender. The counts cover the whole run.
  OtlpPushResult finish(const std::vector<reader::Trace>& traces);
  // The events the rounds and the end read, over every trace: with the collectors' count of the
  // events written, what --max-size removed before the push read it.
  uint64_t events_read() const;
  // Over every trace: OtlpLiveTrace::late_events.
  uint64_t late_events() const;

 private:
  void run();
  void round();
  OtlpLiveTrace& trace_for(const std::string& directory);

  const OtlpPushOptions options_;
  const std::chrono::milliseconds interval_;
  std::unique_ptr<OtlpPushSession> session_;
  std::map<std::string, std::unique_ptr<OtlpLiveTrace>> traces_;  // pusher thread only
  std::exception_ptr read_failure_;                               // pusher thread only
  std::mutex mutex_;
  std::condition_variable wake_;
  struct Published {
    uint64_t complete_below = 0;
    reader::CommittedFiles committed;
  };
  std::map<std::string, Published> published_;  // by directory, under mutex_
  bool stopping_ = false;                       // under mutex_
  std::thread thread_;
};

}  // namespace chronicle::exports
