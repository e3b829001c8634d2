"""Reads a trace with babeltrace2's Python bindings and prints, as JSON, every event (name,
nanoseconds from the Unix epoch, thread id, payload fields) and the discarded-event counts."""
import json
import sys

import bt2


def plain(field):
    # int() of a real field truncates it: reals first.
    if isinstance(field, bt2._RealFieldConst):
        return float(field)
    # A sequence (a sample's frames): its elements.
    if isinstance(field, bt2._ArrayFieldConst):
        return [plain(element) for element in field]
    for convert in (int, float, str):
        try:
            return convert(field)
        except (TypeError, ValueError):
            continue
    return repr(field)


events = []
discarded = 0
for message in bt2.TraceCollectionMessageIterator(sys.argv[1]):
    if type(message) is bt2._EventMessageConst:
        event = message.event
        record = {
            "event": event.name,
            "ns": message.default_clock_snapshot.ns_from_origin,
            "thread_id": int(event.packet.context_field["thread_id"]),
            "fields": {key: plain(event.payload_field[key]) for key in event.payload_field},
        }
        events.append(record)
    elif type(message) is bt2._DiscardedEventsMessageConst:
        discarded += message.count or 0
json.dump({"events": events, "discarded": discarded}, sys.stdout)
