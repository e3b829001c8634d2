"""Reads a Chrome Trace Event JSON file with Python's json module (a parser independent of ours),
checks what does not need the model (every event's required fields, flows and async events
paired by id) and prints a summary as JSON for the C++ test to compare with the model."""
import collections
import json
import sys

REQUIRED = {
    "X": ("name", "cat", "pid", "tid", "ts", "dur"),
    "i": ("name", "cat", "pid", "tid", "ts", "s"),
    "C": ("name", "pid", "ts", "args"),
    "b": ("name", "cat", "pid", "ts", "id"),
    "e": ("name", "cat", "pid", "ts", "id"),
    "s": ("name", "cat", "pid", "tid", "ts", "id"),
    "f": ("name", "cat", "pid", "tid", "ts", "id", "bp"),
    "M": ("name", "pid", "args"),
}


def main(path):
    with open(path, encoding="utf-8") as file:
        document = json.load(file)
    problems = []
    events = document["traceEvents"]
    phases = collections.Counter()
    flows = collections.defaultdict(lambda: collections.Counter())
    flow_names = collections.Counter()
    asyncs = collections.defaultdict(lambda: collections.Counter())
    metadata = collections.Counter()
    pids = set()
    for event in events:
        phase = event.get("ph")
        phases[phase] += 1
        for field in REQUIRED.get(phase, ("ph",)):
            if field not in event:
                problems.append(f"{phase} event without {field}: {event}")
        if phase not in REQUIRED:
            problems.append(f"unexpected phase {phase}")
        if phase in ("X", "i", "C", "b", "e", "s", "f") and not isinstance(event.get("ts"), (int, float)):
            problems.append(f"ts is not a number: {event}")
        if phase == "X" and event.get("dur", 0) < 0:
            problems.append(f"negative duration: {event}")
        if phase in ("s", "f"):
            flows[(event["cat"], event["id"])][phase] += 1
            if phase == "s":
                flow_names[event["name"]] += 1
            elif event["bp"] != "e":
                problems.append(f"flow end not bound to its enclosing slice: {event}")
        if phase in ("b", "e"):
            asyncs[(event["pid"], event["cat"], event["id"])][phase] += 1
        if phase == "M":
            metadata[event["name"]] += 1
        if "pid" in event:
            pids.add(event["pid"])
    unpaired_flows = [key for key, count in flows.items() if count["s"] != 1 or count["f"] != 1]
    unpaired_async = [key for key, count in asyncs.items() if count["b"] != 1 or count["e"] != 1]
    if unpaired_flows:
        problems.append(f"{len(unpaired_flows)} flows without exactly one start and one end, e.g. {unpaired_flows[0]}")
    if unpaired_async:
        problems.append(f"{len(unpaired_async)} async ids without exactly one b and one e, e.g. {unpaired_async[0]}")
    summary = {
        "phases": dict(phases),
        "flows": len(flows),
        "flow_names": dict(flow_names),
        "metadata": dict(metadata),
        "pids": sorted(pids),
        "problems": problems[:10],
    }
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
