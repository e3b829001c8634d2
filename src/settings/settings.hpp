// The environment's conventions, shared by the tools and the runtime (settings.cpp says why they
// are a library of their own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chronicle/config.hpp"

namespace chronicle::recorder {

// "4M", "512K", "1G", "65536": bytes. Throws std::invalid_argument naming the text.
size_t parse_size(std::string_view text);

// Why a session cannot have rings of `buffer_size` bytes made of `packet_size`-byte packets, or ""
// when it can: the rule chronicle::start() applies, for tools that check before a program runs.
std::string ring_geometry_problem(size_t buffer_size, size_t packet_size);

// What to tell the user when a session's ring of `ring_bytes` finds no memory in `shm_dir` (a
// full or small /dev/shm): said once, by the program started from the environment or by
// `record`.
std::string no_memory_for_rings(const std::string& shm_dir, uint64_t ring_bytes);

// Environment variables that configure a session started from the environment.
inline constexpr const char* kEnvOutput = "CHRONICLE_OUTPUT";
inline constexpr const char* kEnvMode = "CHRONICLE_MODE";
inline constexpr const char* kEnvBufferSize = "CHRONICLE_BUFFER_SIZE";
inline constexpr const char* kEnvPacketSize = "CHRONICLE_PACKET_SIZE";
inline constexpr const char* kEnvCategories = "CHRONICLE_CATEGORIES";
inline constexpr const char* kEnvShmDir = "CHRONICLE_SHM_DIR";
inline constexpr const char* kEnvCollector = "CHRONICLE_COLLECTOR";  // "external": `chronicle record` drains
inline constexpr const char* kEnvKeepShm = "CHRONICLE_KEEP_SHM";
inline constexpr const char* kEnvCrashHandler = "CHRONICLE_CRASH_HANDLER";  // "0": no fatal signal handlers
// "1" or "USR2": SIGUSR2 writes a snapshot; "USR1", "SIGUSR1" or a number: that signal.
inline constexpr const char* kEnvSnapshotSignal = "CHRONICLE_SNAPSHOT_SIGNAL";
inline constexpr const char* kEnvSnapshotDir = "CHRONICLE_SNAPSHOT_DIR";
inline constexpr const char* kEnvSelfStatsInterval = "CHRONICLE_SELF_STATS_INTERVAL";  // e.g. 1s, 250ms, 0
inline constexpr const char* kEnvSample = "CHRONICLE_SAMPLE";  // samples per second, e.g. 999; 0: none
inline constexpr const char* kEnvSched = "CHRONICLE_SCHED";    // 1: context switches
inline constexpr const char* kEnvArmed = "CHRONICLE_ARMED";    // any value but "0": every category starts off
// auto, perf or timer: how call-stack samples are taken (Config::sample_method)
inline constexpr const char* kEnvSampleMethod = "CHRONICLE_SAMPLE_METHOD";
inline constexpr const char* kEnvCompress = "CHRONICLE_COMPRESS";  // 1: the trace compressed (Config::compress)

// "1s", "250ms", "0": milliseconds (a bare number is milliseconds). Throws std::invalid_argument.
long parse_interval_ms(std::string_view variable, std::string_view text);
// CHRONICLE_SAMPLE's value: samples per second (the kernel refuses more than
// kernel.perf_event_max_sample_rate, by default some tens of thousands).
inline constexpr unsigned kMaxSampleFrequency = 100000;
unsigned parse_sample_frequency(std::string_view text);
// CHRONICLE_SAMPLE_METHOD's value: auto, perf or timer. Throws std::invalid_argument on anything
// else.
SampleMethod parse_sample_method(std::string_view text);

// The signal CHRONICLE_SNAPSHOT_SIGNAL names; throws std::invalid_argument on anything else.
int parse_snapshot_signal(std::string_view text);

// This process's name: the kernel's (/proc/self/comm; "" if unreadable), whole when the kernel
// cut it to 15 characters (the executable's file name, when that begins with it: a program that
// renamed itself keeps its choice). At most 63 characters.
std::string read_process_name();

// The directory a process writes its trace into when several processes share one output
// directory: the first to claim `output` gets it, the others a subdirectory <name>-<pid>.
std::string claim_output_directory(const std::string& output, std::string_view process_name, int pid);

}  // namespace chronicle::recorder
