// Where a trace's index is kept (beside the trace, or in the caller's cache: docs/viewer.md) and
// how the viewer opens one: from the cache when it fits, else built with the detail the machine's
// memory allows. What an index file holds and how it is checked: index_cache.cpp.
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "format/output_file.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/index_files.hpp"

namespace chronicle::viewer {

namespace fs = std::filesystem;
using index_files::for_each_trace_file;
using index_files::system_error;

namespace {

std::string process_title(const std::vector<reader::Trace>& traces, const std::string& directory,
                          const std::vector<std::string>& trace_directories) {
  return traces.size() == 1
             ? fmt::format("{} ({})", traces.front().description().process_name, trace_directories.front())
             : fmt::format("{} processes ({})", traces.size(), directory);
}

}  // namespace
namespace {

// The caller's directory for indexes kept away from their traces: $XDG_CACHE_HOME/chronicle, by
// default ~/.cache/chronicle; made 0700, and used only when it is a directory of the caller's that
// no one else may write (never through a link).
std::string user_cache_directory() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg && *xdg == '/')
    base = xdg;
  else if (home && *home == '/')
    base = fs::path(home) / ".cache";
  else
    throw std::runtime_error("neither XDG_CACHE_HOME nor HOME names a directory for the index");
  std::error_code ignored;
  fs::create_directories(base, ignored);
  const fs::path directory = base / "chronicle";
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error(system_error("cannot create " + directory.string()));
  struct stat info {};
  if (::lstat(directory.c_str(), &info) != 0)
    throw std::runtime_error(system_error("cannot use " + directory.string()));
  if (!S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() || (info.st_mode & (S_IWGRP | S_IWOTH)))
    throw std::runtime_error(
        fmt::format("{} is not a directory of this user's alone (a link, another user's, or "
                    "writable by others): it is not used",
                    directory.string()));
  return directory.string();
}

// A name for the traces under `directory` in the user's cache: their directory's real path and
// its device and inode, hashed (FNV-1a), so that the same traces find the same file.
std::string cache_name_for(const std::string& directory, const struct stat& info) {
  std::error_code error;
  const std::string identity = fmt::format("{}\n{}\n{}", fs::canonical(directory, error).string(),
                                           static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino));
  uint64_t hash = 14695981039346656037ULL;
  for (const char c : identity) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return fmt::format("view-index-{:016x}", hash);
}

}  // namespace

std::string IndexCache::path_for(const std::string& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) throw std::runtime_error(system_error("cannot look at " + directory));
  // Beside the traces only where no one else may plant a file (a link to one of the caller's)
  // under the names it is written and read by.
  if (info.st_uid == ::geteuid() && !(info.st_mode & (S_IWGRP | S_IWOTH)))
    return (fs::path(directory) / kFileName).string();
  return (fs::path(user_cache_directory()) / cache_name_for(directory, info)).string();
}

namespace {

std::string temporary_directory() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir && *tmpdir ? tmpdir : "/tmp";
}

// The trace files' bytes: what the index grows with.
uint64_t trace_bytes(const std::vector<std::string>& trace_directories) {
  uint64_t bytes = 0;
  for (const std::string& directory : trace_directories)
    for_each_trace_file(
        directory, [&](const std::string&, const struct stat& info) { bytes += static_cast<uint64_t>(info.st_size); });
  return bytes;
}

// CHRONICLE_VIEW_SPILL=always or never decides instead of the memory left (for benchmarks, and
// for a machine whose disk is slower than its swap).
bool spill_wanted(uint64_t trace_bytes, uint64_t available) {
  const char* setting = std::getenv("CHRONICLE_VIEW_SPILL");
  if (setting && std::string_view(setting) == "always") return true;
  if (setting && std::string_view(setting) == "never") return false;
  return spill_needed(trace_bytes, available);
}

double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30);
}

uint64_t file_size(const std::string& path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  return error ? 0 : size;
}

// CHRONICLE_VIEW_NOTES: "keep", "drop", or empty (the memory left decides).
std::string_view notes_setting() {
  const char* setting = std::getenv("CHRONICLE_VIEW_NOTES");
  return setting ? setting : "";
}

bool notes_asked_for() {
  return notes_setting() == "keep";
}

constexpr const char* kNotesLeftOut =
    "the tasks' notes (what was traced inside their runs) are not in this index: memory was short when it was "
    "built (CHRONICLE_VIEW_NOTES=keep keeps them)";

// What the task graphs keep: everything, unless the build may not fit in the memory left
// (CHRONICLE_VIEW_NOTES=keep or drop decides instead). Without the tasks' notes (what was traced
// inside their runs: most of a graph where spans run in tasks, a sixteenth in timeline_demo's
// mix) the viewer draws the same; only task details list no notes. The warning says both.
model::GraphDetail graph_detail(uint64_t trace_bytes, bool in_files, uint64_t available, const OpenProgress& progress) {
  const uint64_t needed = expected_build_memory(trace_bytes, in_files);
  const bool keep_notes = notes_setting() != "drop" && (needed <= available || notes_asked_for());
  if (needed > available && progress.warning)
    progress.warning(fmt::format(
        "indexing {:.2f} GiB of trace may take about {:.2f} GiB of memory, and {:.2f} GiB is left: {}the kernel "
        "may stop it (index it where more memory is free)",
        gib(trace_bytes), gib(needed), gib(available),
        keep_notes ? "" : "the tasks' notes are left out to save some (task details will list none), and "));
  return keep_notes ? model::GraphDetail::full : model::GraphDetail::no_notes;
}

}  // namespace

KeptIndex keep_index(const TimelineIndex& index, const std::string& path, const std::string& identity,
                     const std::atomic<bool>* stop) {
  const auto started = std::chrono::steady_clock::now();
  KeptIndex kept;
  try {
    IndexCache::save(index, path, identity, stop);
    // Mapped back, the index costs only what windows look at; the built one can be let go.
    kept.index = IndexCache::load(path, identity);
    kept.bytes = file_size(path);
  } catch (const IndexCacheStopped&) {
    kept.index.reset();
  } catch (const std::exception& problem) {
    kept.index.reset();
    kept.problem = fmt::format("the index was not kept ({}): the next view indexes again", problem.what());
  }
  kept.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return kept;
}

OpenedIndex open_index(const std::string& directory, bool use_cache, const OpenProgress& progress, bool keep_later) {
  const std::vector<std::string> trace_directories = reader::find_traces(directory);
  OpenedIndex opened;
  std::string path;
  if (use_cache) {
    try {
      path = IndexCache::path_for(directory);
    } catch (const std::exception& problem) {
      opened.cache_problem = fmt::format("the index was not kept ({}): the next view indexes again", problem.what());
      use_cache = false;
    }
  }
  const std::string identity = use_cache ? IndexCache::identity(directory, trace_directories) : std::string();
  if (use_cache) {
    try {
      std::optional<TimelineIndex> index = IndexCache::load(path, identity);
      if (index && notes_asked_for() && std::ranges::count(index->warnings(), std::string(kNotesLeftOut)) != 0)
        index.reset();  // built without the notes, which are now asked for: built again
      if (index) {
        opened.index = std::move(*index);
        opened.from_cache = true;
        opened.cache_path = path;
        opened.cache_bytes = file_size(path);
        return opened;
      }
    } catch (const std::exception& damaged) {  // IndexCacheDamaged, or a count too large to hold
      opened.cache_problem = fmt::format("the index in {} cannot be read ({}): indexing again", path, damaged.what());
    }
  }
  const auto seconds_since = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto build_started = std::chrono::steady_clock::now();
  const uint64_t available = memory_available();
  const uint64_t traces = trace_bytes(trace_directories);
  if (spill_wanted(traces, available))
    opened.spill_directory = use_cache ? fs::path(path).parent_path().string() : temporary_directory();
  const model::GraphDetail detail = graph_detail(traces, !opened.spill_directory.empty(), available, progress);
  opened.index = [&] {
    std::optional<SpillScope> spill;
    if (!opened.spill_directory.empty()) spill.emplace(opened.spill_directory);
    std::vector<reader::Trace> traces;
    for (const std::string& trace : trace_directories) traces.emplace_back(trace);
    TimelineIndex index = TimelineIndex::build(traces, progress.indexing, detail);
    index.title_ = process_title(traces, directory, trace_directories);
    if (detail != model::GraphDetail::full) index.warnings_.push_back(kNotesLeftOut);
    if (spill) opened.spill = spill_stats();
    return index;
  }();
  opened.build_seconds = seconds_since(build_started);
  if (!use_cache) return opened;
  if (keep_later) {
    opened.keep_path = path;
    opened.keep_identity = identity;
    return opened;
  }
  if (progress.writing) progress.writing();
  KeptIndex kept = keep_index(opened.index, path, identity);
  if (!kept.problem.empty()) {
    if (!opened.cache_problem.empty()) opened.cache_problem += "; ";
    opened.cache_problem += kept.problem;
    return opened;
  }
  if (kept.index) opened.index = std::move(*kept.index);
  opened.cache_path = path;
  opened.cache_bytes = kept.bytes;
  opened.write_seconds = kept.seconds;
  return opened;
}

}  // namespace chronicle::viewer
