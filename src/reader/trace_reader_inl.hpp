#pragma once

#include <queue>

namespace chronicle::reader {

template <typename Visitor>
void Trace::for_each_in_stream(size_t index, Visitor&& visit) const {
  StreamCursor cursor(*this, index);
  Event event;
  while (cursor.next(event))
    if (!visit(static_cast<const Event&>(event))) return;
}

template <typename Visitor>
void Trace::for_each_in_stream_packets_holding(size_t index, uint32_t event_types, Visitor&& visit) const {
  StreamCursor cursor(*this, index, event_types);
  Event event;
  while (cursor.next(event))
    if (!visit(static_cast<const Event&>(event))) return;
}

template <typename Visitor>
void Trace::for_each_packet(size_t index, Visitor&& visit) const {
  std::shared_ptr<ReadPosition> position;
  for (size_t packet = 0; packet < readable_packets_[index].size(); ++packet) {
    const uint8_t* data = packet_at(index, packet, position);
    visit(data, reinterpret_cast<const format::PacketHeader*>(data)->packet_size_bits / 8);
  }
}

template <typename Visitor>
void Trace::for_each_event(Visitor&& visit) const {
  SpanPairing pairing(*this);
  for_each_event(pairing, std::forward<Visitor>(visit));
}

template <typename Visitor>
void Trace::for_each_event(SpanPairing& pairing, Visitor&& visit) const {
  std::vector<StreamCursor> cursors;
  cursors.reserve(streams_.size());
  for (size_t i = 0; i < streams_.size(); ++i) cursors.emplace_back(*this, i);
  merge_streams(cursors, pairing, [&visit](const Event& event, const StreamCursor&) { return visit(event); });
}

template <typename Visitor>
void Trace::for_each_event_in(SpanPairing& pairing, const std::vector<EventRanges>& ranges, Visitor&& visit) const {
  // A stream's cursor that seeks past the events outside its ranges.
  class InRanges {
   public:
    InRanges(const Trace& trace, size_t stream, const EventRanges& ranges) : cursor_(trace, stream), ranges_(ranges) {}
    bool next(Event& event) {
      while (range_ < ranges_.size()) {
        const EventRange& range = ranges_[range_];
        if (place_ == range.end) {
          ++range_;
          continue;
        }
        if (place_ < range.first) {
          cursor_.seek(range.mark);
          place_ = range.first;
        }
        if (!cursor_.next(event)) return false;
        ++place_;
        return true;
      }
      return false;
    }
    uint64_t place() const { return place_ - 1; }  // of the event read last

   private:
    StreamCursor cursor_;
    const EventRanges& ranges_;
    size_t range_ = 0;
    uint64_t place_ = 0;  // of the next event the cursor reads
  };
  std::vector<InRanges> sources;
  sources.reserve(streams_.size());
  static const EventRanges kNone;
  for (size_t i = 0; i < streams_.size(); ++i) sources.emplace_back(*this, i, i < ranges.size() ? ranges[i] : kNone);
  merge_streams(sources, pairing,
                [&visit](const Event& event, const InRanges& source) { return visit(event, source.place()); });
}

template <typename Source, typename Visitor>
void Trace::merge_streams(std::vector<Source>& sources, SpanPairing& pairing, Visitor&& visit) {
  struct Head {
    uint64_t ticks;
    size_t stream;
  };
  auto later = [](const Head& a, const Head& b) {
    return a.ticks != b.ticks ? a.ticks > b.ticks : a.stream > b.stream;
  };
  std::vector<Event> current(sources.size());
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i].next(current[i])) heads.push({current[i].ticks, i});
  while (!heads.empty()) {
    const size_t stream = heads.top().stream;
    heads.pop();
    // The stream's events go on until one comes after another stream's next: a thread's events
    // come in runs, and a push and pop of the heap per event was a quarter of `stats`' time.
    const Head* rival = heads.empty() ? nullptr : &heads.top();
    Event& event = current[stream];
    do {
      event.depth = pairing.depth_on(event.thread_id);
      event.span = pairing.follow(event);
      if (event.span && event.type == format::EventId::span_end) {
        event.name_id = event.span->site_id;
        event.depth = event.span->depth;
      }
      if (!visit(static_cast<const Event&>(event), static_cast<const Source&>(sources[stream]))) return;
      if (!sources[stream].next(event)) break;
      if (rival && later(Head{event.ticks, stream}, *rival)) {
        heads.push({event.ticks, stream});
        break;
      }
    } while (true);
  }
}

}  // namespace chronicle::reader
