"""Reads a Chrome Trace Event JSON file with Python's json module (a parser independent of ours),
checks what does not need the model (every event's required fields, flows and async events
paired by id, slices nested per thread with the floating-point arithmetic viewers use) and prints a summary as JSON for the C++ test to compare with the model."""
import collections
import json
import sys

REQUIRED = {
    "X": ("name", "cat", "pid", "tid", "ts", "dur"),
    "B": ("name", "cat", "pid", "tid", "ts"),
    "E": ("pid", "tid", "ts"),
    "i": ("name", "cat", "pid", "tid", "ts", "s"),
    "C": ("name", "pid", "ts", "args"),
    "b": ("name", "cat", "pid", "ts", "id"),
    "e": ("name", "cat", "pid", "ts", "id"),
    "s": ("name", "cat", "pid", "tid", "ts", "id"),
    "f": ("name", "cat", "pid", "tid", "ts", "id", "bp"),
    "M": ("name", "pid", "args"),
}


def nesting_problems(events):
    """Slices on one thread must nest as viewers compute them: an X event ends at ts + dur added
    as doubles (what JavaScript viewers do), so a child must end no later than its parent and a
    slice no later than its next sibling begins; B/E pairs must follow a stack, each E closing
    the innermost open B (events of one thread in time order, ties in file order)."""
    problems = []
    threads = collections.defaultdict(list)
    for index, event in enumerate(events):
        if event.get("ph") in ("X", "B", "E"):
            threads[(event["pid"], event["tid"])].append((float(event["ts"]), index, event))
    for thread, items in threads.items():
        items.sort(key=lambda item: (item[0], item[1]))
        # X: by begin, longer first at equal begins (the parent); pop what ended by this begin.
        complete = sorted(((ts, -(ts + float(e["dur"])), i, e) for ts, i, e in items if e["ph"] == "X"))
        stack = []
        for ts, negative_end, _, event in complete:
            end = -negative_end
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and end > stack[-1][0]:
                parent = stack[-1][1]
                problems.append(f"thread {thread}: {event['name']} at {event['ts']} ends at {end!r}, after "
                                f"{parent['name']} at {parent['ts']} (ends at {stack[-1][0]!r}) that encloses its begin")
            stack.append((end, event))
        open_slices = []
        for ts, _, event in items:
            if event["ph"] == "B":
                open_slices.append(event)
            elif event["ph"] == "E":
                if not open_slices:
                    problems.append(f"thread {thread}: E at {event['ts']} with no open B")
                    continue
                begin = open_slices.pop()
                if "name" in event and event["name"] != begin["name"]:
                    problems.append(f"thread {thread}: E of {event['name']} at {event['ts']} closes "
                                    f"{begin['name']} (begun at {begin['ts']})")
        for begin in open_slices:
            problems.append(f"thread {thread}: B of {begin['name']} at {begin['ts']} never ends")
    return problems


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
        if phase in ("X", "B", "E", "i", "C", "b", "e", "s", "f") and not isinstance(event.get("ts"), (int, float)):
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
    problems += nesting_problems(events)
    summary = {
        "phases": dict(phases),
        "flows": len(flows),
        "flow_names": dict(flow_names),
        "metadata": dict(metadata),
        "pids": sorted(pids),
        "problems": problems[:10],
        "problem_count": len(problems),
    }
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
