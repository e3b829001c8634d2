// `chronicle merge`: several traces (processes, hosts) made one, each host's clock put on a
// reference host's. The output is a directory with one trace per input trace, as a `chronicle
// record` run of several processes is: every tool and babeltrace2 read it as they read that.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/metadata.hpp"
#include "merge/clock_alignment.hpp"
#include "merge/message_pairs.hpp"

namespace chronicle::reader {
class Trace;
}

namespace chronicle::merge {

// One clock per host: the traces recorded on it (hostname: the metadata has no boot id, so two
// boots of one host count as one).
// "whole milliseconds" for 1,000,000 ns: how a time resolution is said.
std::string resolution_text(uint64_t resolution_ns);

struct Host {
  std::string name;
  std::vector<size_t> traces;  // indices into the merged traces
  HostAlignment alignment;
  uint64_t time_resolution_ns = 0;  // the coarsest of its traces' (TraceDescription); 0: ns
};

struct PlannedTrace {
  size_t host = 0;
  std::string subdirectory;  // in the output: <host>-<pid>-<process>, made unique
  format::ClockCalibration clock;
  format::ClockCorrection correction;
};

struct MergePlan {
  std::vector<Host> hosts;  // hosts[0] is the reference: the host of the first trace
  std::vector<PlannedTrace> traces;
  uint64_t pairs = 0;
};

// Opens the traces in `directories` (as reader::Trace does: every packet is checked), several at
// a time on as many cores as there are. Throws the first input's error, in input order.
std::vector<reader::Trace> open_traces(const std::vector<std::string>& directories);

// Groups `traces` by host, aligns the hosts' clocks from `pairs` (find_message_pairs), and says
// where each trace goes and with which clock. Throws std::invalid_argument when a trace is
// given twice (the same uuid).
MergePlan plan_merge(const std::vector<reader::Trace>& traces, const std::vector<MessagePair>& pairs);

// Bytes copied so far, of how many.
using CopyProgress = std::function<void(uint64_t copied, uint64_t total)>;

// Writes each stream of `trace` into `directory` as one plain CTF stream file (its sound packets,
// decoded for a .ctfz, joined across a rotated trace's chunks), and its definitions as `strings`;
// not the metadata. Reports each packet's bytes to `count`. Throws std::runtime_error when a file
// cannot be written (or is there already).
void write_plain_streams(const reader::Trace& trace, const std::string& directory,
                         const std::function<void(uint64_t)>& count);

// Writes the plan into `output` (an existing empty directory): per trace a subdirectory with its
// stream files copied byte for byte (a compressed or rotated trace: its sound packets decoded, a
// stream's chunks joined, as `chronicle convert` writes them) and its metadata with the corrected
// clock. Returns the bytes
// copied. Throws std::runtime_error when a file cannot be read or written.
uint64_t write_merge(const std::vector<reader::Trace>& traces, const MergePlan& plan, const std::string& output,
                     const CopyProgress& progress = {});

// A part of a file name made of a name a trace or OTLP resource gives (host, process, service):
// letters, digits, '.', '_' and '-' (no leading dot), at most 100 bytes.
std::string path_part(const std::string& text);

}  // namespace chronicle::merge
