// The viewer's index kept on disk, so that a trace is indexed once: `chronicle view` writes it
// beside the trace the first time and maps it afterwards, and what a window looks at is read
// from disk when first touched (Column). Reopening costs the small parts of the index only
// (lanes, sites, counter names, warnings, where each column lies); the task graphs are read
// when details or a critical path first need them.
//
// The file (`.chronicle-view-index` in the directory given to view, a dot-file which the reader
// and babeltrace2 skip, or in the caller's cache directory: path_for) holds:
//   a header: magic, format version, the offsets of the two descriptions below;
//   the columns, each at a 64-byte boundary;
//   the graphs' description (read on first use) and the index's description: the identity of
//   the traces it was built from (each file's name, size and modification time), then every
//   field, a column as its offset and length.
// It is written to a temporary name and renamed, so a reader sees a whole file or none. One
// that does not match the traces (they changed), is of another format version, or is damaged
// (cut short, offsets outside the file) is not used: the index is built again and the file
// replaced. Its header holds a checksum of all its bytes, checked at each opening before any of
// it is used (an index beside a trace is input too); the pages that reading maps are let go
// again, so a reopened index is resident only where windows look.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "viewer/spill.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle::viewer {

struct IndexCacheStopped : std::runtime_error {
  IndexCacheStopped() : std::runtime_error("stopped before it was whole") {}
};

struct IndexCacheDamaged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class IndexCache {
 public:
  static constexpr const char* kFileName = ".chronicle-view-index";

  // Where the index of the traces under `directory` is kept and looked for: beside them
  // (DIR/.chronicle-view-index) when DIR is the caller's and no one else may write it, else in
  // the caller's cache ($XDG_CACHE_HOME/chronicle, default ~/.cache/chronicle, mode 0700) under a
  // name made from DIR's real path, device and inode. Throws std::runtime_error when neither is
  // safe (the cache directory is a link, another user's, or writable by others).
  static std::string path_for(const std::string& directory);

  // What the index of `trace_directories` (what find_traces gave for `top`) depends on.
  static std::string identity(const std::string& top, const std::vector<std::string>& trace_directories);
  // Throws std::runtime_error when the file cannot be written (its temporary is removed), and
  // IndexCacheStopped as soon as it sees `stop` true (nothing kept, no file left).
  static void save(const TimelineIndex& index, const std::string& path, const std::string& identity,
                   const std::atomic<bool>* stop = nullptr);
  // nullopt when there is no file or it was built from other traces or by another format
  // version; throws IndexCacheDamaged when it cannot be read as an index.
  static std::optional<TimelineIndex> load(const std::string& path, const std::string& identity);

 private:
  struct Fields;
};

struct OpenedIndex {
  TimelineIndex index;
  bool from_cache = false;
  std::string cache_path;     // read from or written to; empty when the cache was not used
  std::string cache_problem;  // why it could not be read or written, for a warning; empty if none
  double build_seconds = 0;   // indexing the trace (0 when read from the cache)
  double write_seconds = 0;   // writing the cache and mapping it back
  uint64_t cache_bytes = 0;   // the cache file's size, when written or read
  // When the trace was too large for the memory left (spill_needed), the index's large arrays
  // were held in files while it was built: in `spill_directory` (empty when they were not), so
  // much at most, and so many refused a file.
  std::string spill_directory;
  SpillStats spill;
  // With keep_later: where keep_index is to write it, and what it is made from (empty when the
  // cache is not used or the index was read from it).
  std::string keep_path;
  std::string keep_identity;
};

// The traces under `directory` as `chronicle view` shows them: the index read from its cache
// when that matches the traces, else built (and, when `use_cache`, written to the cache and
// mapped back, so that the memory the building used is let go). When the trace is too large for
// the memory left (spill_needed; CHRONICLE_VIEW_SPILL=always or never overrides), the large
// arrays of the index being built are held in files (spill.hpp) in `directory` when the cache
// is used, else in $TMPDIR (or /tmp).
// Long work as it goes, for a progress line: the events read so far while indexing
// (TimelineIndex::build), then the index being written to disk.
// Before indexing, `warning` is told when the build may take more memory than is left (the
// kernel may then stop it), so that the user knows while it runs.
struct OpenProgress {
  TimelineIndex::Progress indexing;
  std::function<void()> writing;
  std::function<void(const std::string&)> warning;
};

// With `keep_later`, a built index is returned before it is written: keep_index writes it (view
// serves the built index meanwhile).
OpenedIndex open_index(const std::string& directory, bool use_cache = true, const OpenProgress& progress = {},
                       bool keep_later = false);

struct KeptIndex {
  std::optional<TimelineIndex> index;  // mapped back from the file; nullopt when it was not kept
  uint64_t bytes = 0;
  double seconds = 0;   // writing it and mapping it back
  std::string problem;  // why it was not kept, for a warning; empty if it was, or when stopped
};

// Writes a built index to `path` (OpenedIndex::keep_path) and maps it back, so that the memory
// of the built one can be let go. Setting `stop` abandons it: nothing is kept, no file is left.
KeptIndex keep_index(const TimelineIndex& index, const std::string& path, const std::string& identity,
                     const std::atomic<bool>* stop = nullptr);

}  // namespace chronicle::viewer
