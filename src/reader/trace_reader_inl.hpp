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
  struct Head {
    uint64_t ticks;
    size_t stream;
  };
  auto later = [](const Head& a, const Head& b) {
    return a.ticks != b.ticks ? a.ticks > b.ticks : a.stream > b.stream;
  };
  std::vector<StreamCursor> cursors;
  std::vector<Event> current(streams_.size());
  cursors.reserve(streams_.size());
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (size_t i = 0; i < streams_.size(); ++i) {
    cursors.emplace_back(*this, i);
    if (cursors[i].next(current[i])) heads.push({current[i].ticks, i});
  }
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
      if (!visit(static_cast<const Event&>(event))) return;
      if (!cursors[stream].next(event)) break;
      if (rival && later(Head{event.ticks, stream}, *rival)) {
        heads.push({event.ticks, stream});
        break;
      }
    } while (true);
  }
}

}  // namespace chronicle::reader
