#include "viewer/index_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string_view>

#include "format/output_file.hpp"
#include "reader/run_on_threads.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"
#include "viewer/index_files.hpp"

namespace chronicle::viewer {
namespace {

namespace fs = std::filesystem;
using index_files::for_each_trace_file;
using index_files::system_error;

// Bump when what is written changes (a field, a column's type, how the builder fills them).
// 8: whole spans and each lane's busy intervals; 9: their attributes; 10: the tasks' own attributes;
// 11: lost events; 12: tasks by time; 13: arrows by the rows they join, and merged ahead of time;
// 14: running times only where a span paused, busy rows without items; 15: busy sums per 64
// intervals; 16: a busy row that is the outermost spans kept once; 17: a span in one piece read from
// its piece; 18: each block of spans' own reach
constexpr uint32_t kFormatVersion = 18;
constexpr char kMagic[8] = {'C', 'H', 'R', 'V', 'I', 'D', 'X', '\n'};
constexpr uint64_t kAlignment = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t layout;  // sizes of the structs written as bytes, so that another build's file is not misread
  uint64_t graphs_offset;
  uint64_t graphs_size;
  uint64_t fields_offset;
  uint64_t fields_size;
  uint64_t checksum;  // FileChecksum of the whole file, this field taken as zero
};

// A sum over the file's 8-byte words, each times an odd number its place picks: any change of a
// single word (a bit flipped, a count or offset rewritten) changes the sum, and the sum is the
// same whatever order the writer writes its pieces in (it writes columns before the header).
// Checked before any of the file is used: a damaged index is built again, never followed.
class FileChecksum {
 public:
  void add(uint64_t offset, const char* bytes, size_t size) {
    for (; size > 0 && offset % 8 != 0; --size) add_byte(offset++, static_cast<uint8_t>(*bytes++));
    for (; size >= 8; size -= 8, offset += 8, bytes += 8) {
      uint64_t word = 0;
      std::memcpy(&word, bytes, 8);
      sum_ += word * weight(offset / 8);
    }
    for (; size > 0; --size) add_byte(offset++, static_cast<uint8_t>(*bytes++));
  }
  uint64_t sum() const { return sum_; }

 private:
  // A byte's share of its word's product: the product is linear in the word's bytes.
  void add_byte(uint64_t offset, uint8_t byte) { sum_ += (uint64_t{byte} << (8 * (offset % 8))) * weight(offset / 8); }
  // Distinct for any two words of a file under 2^63 bytes (the multiplier is odd, so the products
  // differ; setting the low bit merges two only if they differed by one). One multiplication:
  // reopening reads the whole file, and with a mixing function's three it ran at 2.1 GB/s.
  static uint64_t weight(uint64_t word_index) { return (word_index * 0x9e3779b97f4a7c15ULL) | 1; }

  uint64_t sum_ = 0;
};

// Unmaps the whole pages of [from, to) of a mapping at `base` (they stay in the page cache and
// are mapped again when read).
void let_pages_go(const char* base, size_t from, size_t to) {
  static const auto kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  from = (from + kPage - 1) / kPage * kPage;
  to = to / kPage * kPage;
  if (from < to) madvise(const_cast<char*>(base + from), to - from, MADV_DONTNEED);
}

// The checksum of a mapped file of `size` bytes at `file`, read in stretches that are let go as
// soon as they are added up: reopening reads the whole index, and no more of it than a stretch
// per thread is ever resident for that. The file's halves are added up on both cores (the sum is
// a sum of the words' shares).
constexpr size_t kStretch = size_t{32} << 20;

uint64_t checksum_of(const char* file, size_t size) {
  constexpr size_t kField = offsetof(Header, checksum);
  constexpr size_t kAfterField = kField + sizeof(uint64_t);
  const size_t half = std::max(kAfterField, (size / 2) & ~size_t{7});
  auto sum_of = [file](size_t from, size_t to) {
    FileChecksum checksum;
    for (size_t at = from; at < to; at += std::min(kStretch, to - at)) {
      const size_t stretch = std::min(kStretch, to - at);
      checksum.add(at, file + at, stretch);
      let_pages_go(file, at, at + stretch);
    }
    return checksum.sum();
  };
  uint64_t halves[2] = {0, 0};
  reader::run_on_threads(2, 2, [&](size_t which) {
    halves[which] = which == 0 ? sum_of(0, kField) + sum_of(kAfterField, half) : sum_of(half, size);
  });
  let_pages_go(file, 0, size);  // the pages the stretches' ends shared
  return halves[0] + halves[1];
}

uint32_t layout_signature() {
  return static_cast<uint32_t>(sizeof(TaskLine) | sizeof(Arrow) << 6 | sizeof(MessageArrow) << 12 |
                               sizeof(model::RunInterval) << 18 | sizeof(model::Edge) << 24);
}

class Mapping {
 public:
  // nullptr when there is no file at `path`.
  static std::shared_ptr<const Mapping> open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return nullptr;
      throw IndexCacheDamaged(system_error("cannot open " + path));
    }
    struct stat info {};
    if (fstat(fd, &info) != 0 || info.st_size < static_cast<off_t>(sizeof(Header))) {
      ::close(fd);
      throw IndexCacheDamaged("shorter than its header");
    }
    const auto size = static_cast<size_t>(info.st_size);
    void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) throw IndexCacheDamaged(system_error("cannot map " + path));
    return std::shared_ptr<const Mapping>(new Mapping(static_cast<const char*>(base), size));
  }
  ~Mapping() { munmap(const_cast<char*>(base_), size_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const char* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  Mapping(const char* base, size_t size) : base_(base), size_(size) {}
  const char* base_;
  size_t size_;
};

// Writes columns straight to the file, each at an aligned offset, and the other fields into a
// description kept in memory until it is written after them. A streamed description (the task
// graphs: gigabytes at a billion events, too much to hold a second time) goes to the file as it
// is made instead, and holds no column.
//
// What it writes as bytes has no padding (its padding is named and zeroed), so that a file holds
// no stray bytes of the viewer's memory and one trace's index is the same file every time.
template <class T>
constexpr bool kWrittenWhole = std::is_trivially_copyable_v<T> &&
                               (std::has_unique_object_representations_v<T> || std::is_floating_point_v<T>);

class CacheWriter {
 public:
  explicit CacheWriter(int fd, const std::atomic<bool>* stop = nullptr) : fd_(fd), stop_(stop) {}

  template <class T>
  void value(const T& value) {
    static_assert(kWrittenWhole<T>);
    append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  template <class T>
  void value(const std::optional<T>& value) {
    this->value<uint8_t>(value.has_value());
    this->value(value.value_or(T{}));
  }
  void text(std::string_view text) {
    value<uint64_t>(text.size());
    append(text.data(), text.size());
  }
  template <class T>
  void values(const std::vector<T>& values) {
    static_assert(kWrittenWhole<T>);
    value<uint64_t>(values.size());
    append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  template <class T>
  void column(const Column<T>& column) {
    static_assert(kWrittenWhole<T>);
    if (streamed_) throw std::logic_error("a column inside a streamed description");
    value(blob(reinterpret_cast<const char*>(column.data()), column.size() * sizeof(T)));
    value<uint64_t>(column.size());
  }
  template <class Items, class Each>
  void sequence(const Items& items, Each each) {
    value<uint64_t>(items.size());
    for (const auto& item : items) each(item);
  }

  // Where the next byte of a streamed description goes, from the description's start.
  uint64_t streamed_position() const { return end_ + description_.size() - streamed_offset_; }

  void stream_description() {
    streamed_ = true;
    streamed_offset_ = aligned(end_);
    end_ = streamed_offset_;
  }

  // The description so far, written as a blob: its offset and size.
  std::pair<uint64_t, uint64_t> write_description() {
    if (streamed_) {
      flush_streamed();
      streamed_ = false;
      return {streamed_offset_, end_ - streamed_offset_};
    }
    const uint64_t offset = blob(description_.data(), description_.size());
    const uint64_t size = description_.size();
    description_.clear();
    description_.shrink_to_fit();
    return {offset, size};
  }

  // Every byte written, each written once (the header last): the file's checksum.
  uint64_t checksum() const { return checksum_.sum(); }

  void write_at(uint64_t offset, const char* bytes, size_t size) {
    if (stop_ && stop_->load(std::memory_order_relaxed)) throw IndexCacheStopped();
    checksum_.add(offset, bytes, size);
    while (size > 0) {
      const ssize_t written = pwrite(fd_, bytes, size, static_cast<off_t>(offset));
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) throw std::runtime_error(system_error("cannot write"));
      bytes += written;
      size -= static_cast<size_t>(written);
      offset += static_cast<uint64_t>(written);
    }
  }

 private:
  static constexpr size_t kStreamedChunk = size_t{4} << 20;

  static uint64_t aligned(uint64_t offset) { return (offset + kAlignment - 1) / kAlignment * kAlignment; }

  void append(const char* bytes, size_t size) {
    if (size == 0) return;
    description_.append(bytes, size);
    if (streamed_ && description_.size() >= kStreamedChunk) flush_streamed();
  }

  void flush_streamed() {
    write_at(end_, description_.data(), description_.size());
    end_ += description_.size();
    description_.clear();
  }

  uint64_t blob(const char* bytes, size_t size) {
    const uint64_t offset = aligned(end_);
    write_at(offset, bytes, size);
    end_ = offset + size;
    return offset;
  }

  int fd_;
  const std::atomic<bool>* stop_;
  FileChecksum checksum_;
  uint64_t end_ = sizeof(Header);
  std::string description_;
  bool streamed_ = false;
  uint64_t streamed_offset_ = 0;
};

// Reads a description back; columns point into the mapping. Every length and offset is checked
// against the file: a damaged file throws IndexCacheDamaged, it never reads outside.
class CacheReader {
 public:
  CacheReader(std::shared_ptr<const Mapping> mapping, uint64_t offset, uint64_t size)
      : mapping_(std::move(mapping)), next_(mapping_->base() + offset), end_(next_ + size) {}

  template <class T>
  void value(T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof value);
    std::memcpy(&value, next_, sizeof value);
    next_ += sizeof value;
  }
  // Any byte is a bool (a damaged file's 7 is not a bool's value: reading it as one is undefined).
  void value(bool& value) {
    uint8_t byte = 0;
    this->value(byte);
    value = byte != 0;
  }
  template <class T>
  void value(std::optional<T>& value) {
    bool present = false;
    T inner{};
    this->value(present);
    this->value(inner);
    value = present ? std::optional<T>(inner) : std::nullopt;
  }
  void text(std::string& text) {
    const uint64_t size = count(1);
    text.assign(next_, size);
    next_ += size;
  }
  template <class T>
  void values(std::vector<T>& values) {
    const uint64_t size = count(sizeof(T));
    values.resize(size);
    if (size != 0) std::memcpy(values.data(), next_, size * sizeof(T));
    next_ += size * sizeof(T);
  }
  template <class T>
  void column(Column<T>& column) {
    uint64_t offset = 0;
    uint64_t size = 0;
    value(offset);
    value(size);
    const uint64_t file_size = mapping_->size();
    if (offset % alignof(T) != 0 || offset > file_size || size > (file_size - offset) / sizeof(T))
      throw IndexCacheDamaged(fmt::format("a column ({} values at {}) lies outside the file", size, offset));
    column = Column<T>::mapped(mapping_, reinterpret_cast<const T*>(mapping_->base() + offset), size);
  }
  // Each item takes at least a byte of the description, which bounds the count.
  template <class Items, class Each>
  void sequence(Items& items, Each each) {
    items.resize(count(1));
    for (auto& item : items) each(item);
  }
  bool at_end() const { return next_ == end_; }

 private:
  void need(uint64_t bytes) const {
    if (bytes > static_cast<uint64_t>(end_ - next_)) throw IndexCacheDamaged("the description is cut short");
  }
  uint64_t count(uint64_t item_size) {
    uint64_t size = 0;
    value(size);
    if (size > static_cast<uint64_t>(end_ - next_) / item_size)
      throw IndexCacheDamaged(fmt::format("a count of {} runs past the description's end", size));
    return size;
  }

  std::shared_ptr<const Mapping> mapping_;
  const char* next_;
  const char* end_;
};

template <class A, class R>
void transfer(A& a, R& row) {  // IntervalRow
  a.column(row.begins);
  a.column(row.ends);
  a.column(row.items);
}

template <class A, class S>
void transfer_strings(A& a, S& strings) {  // StringColumn
  a.column(strings.first);
  a.column(strings.chars);
}

template <class A, class T>
void transfer_task(A& a, T& task) {  // model::Task
  a.value(task.id);
  a.value(task.kind);
  a.text(task.name);
  a.text(task.label);
  a.value(task.parent);
  a.value(task.created_on_thread);
  a.value(task.created);
  a.value(task.resolved);
  a.value(task.outcome);
  a.text(task.outcome_text);
  a.value(task.resolver);
  a.values(task.runs);
  a.values(task.waits_on);
  a.sequence(task.notes, [&](auto& note) {
    a.value(note.ticks);
    a.value(note.thread_id);
    a.value(note.type);
    a.text(note.text);
  });
  a.value(task.seen_created);
  a.value(task.folded_run_ticks);
}

// `records`: where each task's record begins, appended in task order.
void write_graph(CacheWriter& a, const model::TaskGraph& graph, Column<uint64_t>::Built& records) {
  a.sequence(graph.tasks(), [&](const model::Task& task) {
    records.push_back(a.streamed_position());
    transfer_task(a, task);
  });
  a.values(graph.edges());
  a.values(graph.idle());
  a.sequence(graph.idle_ticks_by_thread(), [&](const auto& entry) {
    a.value(entry.first);
    a.value(entry.second);
  });
  a.sequence(graph.problems(), [&](const std::string& problem) { a.text(problem); });
  a.value(graph.first_ticks());
  a.value(graph.last_ticks());
}

model::TaskGraph read_graph(CacheReader& a) {
  std::vector<model::Task> tasks;
  a.sequence(tasks, [&](model::Task& task) { transfer_task(a, task); });
  std::vector<model::Edge> edges;
  a.values(edges);
  std::vector<model::IdleInterval> idle;
  a.values(idle);
  std::vector<std::pair<uint32_t, uint64_t>> idle_ticks;
  a.sequence(idle_ticks, [&](auto& entry) {
    a.value(entry.first);
    a.value(entry.second);
  });
  std::vector<std::string> problems;
  a.sequence(problems, [&](std::string& problem) { a.text(problem); });
  uint64_t first_ticks = 0;
  uint64_t last_ticks = 0;
  a.value(first_ticks);
  a.value(last_ticks);
  return model::TaskGraph::from_parts(std::move(tasks), std::move(edges), std::move(idle),
                                      std::map<uint32_t, uint64_t>(idle_ticks.begin(), idle_ticks.end()),
                                      std::move(problems), first_ticks, last_ticks);
}

void write_file(const TimelineIndex& index, int fd, const std::string& identity, const std::atomic<bool>* stop,
                const std::function<void(CacheWriter&, const Column<uint64_t>&)>& write_fields) {
  CacheWriter writer(fd, stop);
  writer.stream_description();
  Column<uint64_t>::Built records;
  records.reserve(index.task_lines().size());
  writer.sequence(index.graphs(), [&](const model::TaskGraph& graph) { write_graph(writer, graph, records); });
  const auto [graphs_offset, graphs_size] = writer.write_description();
  writer.text(identity);
  write_fields(writer, Column<uint64_t>(std::move(records)));
  const auto [fields_offset, fields_size] = writer.write_description();
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kFormatVersion;
  header.layout = layout_signature();
  header.graphs_offset = graphs_offset;
  header.graphs_size = graphs_size;
  header.fields_offset = fields_offset;
  header.fields_size = fields_size;
  writer.write_at(0, reinterpret_cast<const char*>(&header), sizeof header);
  header.checksum = writer.checksum();
  writer.write_at(offsetof(Header, checksum), reinterpret_cast<const char*>(&header.checksum), sizeof header.checksum);
}

std::string relative_to(const std::string& top, const std::string& directory) {
  std::error_code error;
  const fs::path relative = fs::relative(directory, top, error);
  return error ? directory : relative.string();
}

}  // namespace

// Every field of a TimelineIndex, in one order for writing and reading: `a` is a CacheWriter
// (index const) or a CacheReader.
struct IndexCache::Fields {
  template <class A, class I>
  static void transfer(A& a, I& index) {
    a.value(index.origin_ticks_);
    a.value(index.origin_unix_ns_);
    a.value(index.origin_offset_ns_);
    a.value(index.duration_);
    a.value(index.event_count_);
    a.value(index.ns_per_tick_);
    a.text(index.title_);
    a.sequence(index.sites_, [&](auto& site) {
      a.value(site.id);
      a.value(site.kind);
      a.text(site.category);
      a.text(site.name);
      a.text(site.file);
      a.value(site.line);
    });
    a.sequence(index.lanes_, [&](auto& lane) { transfer_lane(a, lane); });
    a.sequence(index.task_processes_, [&](auto& process) {
      a.text(process.group);
      a.value(process.first_task);
      a.value(process.first_lane);
      a.value(process.origin_ticks);
      a.value(process.origin_offset_ns);
      a.value(process.ns_per_tick);
      a.value(process.first_ticks);
      a.value(process.edge_count);
    });
    a.column(index.task_lines_);
    transfer_strings(a, index.task_names_);
    transfer_strings(a, index.task_labels_);
    a.column(index.task_attribute_tasks_);
    transfer_strings(a, index.task_attribute_texts_);
    a.column(index.task_tree_.row_task);
    a.column(index.task_tree_.row);
    a.column(index.task_tree_.subtree);
    a.column(index.task_tree_.depth);
    a.column(index.task_time_rows_.row);
    a.column(index.task_time_rows_.first);
    a.column(index.task_time_rows_.order);
    a.column(index.task_time_rows_.begins);
    a.column(index.task_time_rows_.ends);
    a.column(index.task_time_rows_.failed_before);
    a.column(index.task_time_rows_.cancelled_before);
    a.column(index.task_time_rows_.process_first);
    a.column(index.run_first_);
    a.column(index.run_begins_);
    a.column(index.run_ends_);
    a.column(index.arrows_);
    a.sequence(index.arrows_by_length_, [&](auto& column) { a.column(column); });
    for (auto& classes : index.arrows_by_rows_) a.sequence(classes, [&](auto& column) { a.column(column); });
    a.column(index.arrow_levels_.order);
    a.sequence(index.arrow_levels_.levels, [&](auto& level) {
      a.value(level.shift);
      a.column(level.first);
      a.column(level.leader);
      a.column(level.from_times);
      a.column(level.to_times);
    });
    a.column(index.messages_);
    a.column(index.task_ids_sorted_);
    a.column(index.task_by_sorted_id_);
    a.column(index.wait_first_);
    a.column(index.waits_);
    a.column(index.task_arrow_first_);
    a.column(index.task_arrow_list_);
    a.sequence(index.counters_, [&](auto& series) { transfer_counter(a, series); });
    a.column(index.sample_stacks_.first);
    a.column(index.sample_stacks_.frames);
    transfer_strings(a, index.sample_stacks_.functions);
    viewer::transfer(a, index.samples_without_lane_);
    a.sequence(index.warnings_, [&](auto& warning) { a.text(warning); });
    a.sequence(index.busy_sums_, [&](auto& column) { a.column(column); });
    a.column(index.whole_spans_.begins);
    a.column(index.whole_spans_.ends);
    a.column(index.whole_spans_.sites);
    a.column(index.whole_spans_.piece_depths);
    a.column(index.whole_spans_.pieces);
    a.column(index.whole_spans_.lanes);
    a.column(index.whole_spans_.parents);
    a.column(index.whole_spans_.reach);
    a.column(index.whole_spans_.block_reach);
    a.column(index.whole_spans_.block_begins);
    a.column(index.whole_spans_.paused);
    a.column(index.whole_spans_.paused_running);
    a.column(index.whole_spans_.attribute_spans);
    transfer_strings(a, index.whole_spans_.attribute_texts);
  }

  template <class A, class L>
  static void transfer_lane(A& a, L& lane) {
    a.value(lane.thread_id);
    a.text(lane.name);
    a.text(lane.group);
    a.sequence(lane.depths, [&](auto& row) { viewer::transfer(a, row); });
    a.sequence(lane.runs, [&](auto& row) { viewer::transfer(a, row); });
    viewer::transfer(a, lane.idle);
    viewer::transfer(a, lane.off_cpu);
    viewer::transfer(a, lane.samples);
    viewer::transfer(a, lane.lost);
    viewer::transfer(a, lane.busy);
    a.value(lane.busy_is_outermost);
    a.sequence(lane.depth_spans, [&](auto& column) { a.column(column); });
    a.column(lane.markers.times);
    a.column(lane.markers.sites);
    a.column(lane.markers.types);
    transfer_strings(a, lane.markers.texts);
    a.value(lane.span_count);
  }

  template <class A, class S>
  static void transfer_counter(A& a, S& series) {
    a.value(series.site);
    a.value(series.lane);
    a.values(series.lanes);
    a.column(series.sample_lanes);
    a.text(series.name);
    a.value(series.kind);
    a.column(series.times);
    a.column(series.values);
    a.sequence(series.pyramid.mins_, [&](auto& level) { a.column(level); });
    a.sequence(series.pyramid.maxs_, [&](auto& level) { a.column(level); });
    a.value(series.min);
    a.value(series.max);
  }

  // `records`: where write_file put each task's record (a built index has no such column).
  static void write(CacheWriter& a, const TimelineIndex& index, const Column<uint64_t>& records) {
    transfer(a, index);
    a.sequence(index.cross_process_directories(), [&](const std::string& directory) { a.text(directory); });
    a.column(records);
  }

  static void read(CacheReader& a, TimelineIndex& index) {
    transfer(a, index);
    std::vector<std::string> directories;
    a.sequence(directories, [&](std::string& directory) { a.text(directory); });
    if (!directories.empty()) index.cross_process_ = TimelineIndex::paths_between(std::move(directories));
    a.column(index.task_records_);
    check_lookup(index);
  }

  // The lookups' sizes agree with the tasks and arrows (their values are checked where read).
  static void check_lookup(const TimelineIndex& index) {
    const size_t tasks = index.task_lines_.size();
    const bool whole = index.task_ids_sorted_.size() == tasks && index.task_by_sorted_id_.size() == tasks &&
                       index.task_records_.size() == tasks && index.wait_first_.size() == tasks + 1 &&
                       index.task_arrow_first_.size() == tasks + 1 && index.wait_first_.back() == index.waits_.size() &&
                       index.task_arrow_first_.back() == index.task_arrow_list_.size();
    if (!whole) throw IndexCacheDamaged("its task lookup does not match its tasks");
    check_time_rows(index.task_time_rows_, tasks, index.task_processes_.size());
    check_whole_spans(index.whole_spans_);
    for (const Lane& lane : index.lanes_)
      if (lane.busy_is_outermost && (lane.depths.empty() || lane.busy.size() != 0))
        throw IndexCacheDamaged("a lane's busy time names spans it does not have");
  }

  // Every span has each field, and the paused spans' running times are theirs (where a span's piece
  // lies is checked where it is read, WholeSpans::at: checking it here would read every span's).
  static void check_whole_spans(const WholeSpans& spans) {
    const size_t count = spans.size();
    const size_t apart = spans.begins.size();
    bool whole = spans.ends.size() == apart && spans.sites.size() == apart && spans.parents.size() == count &&
                 spans.running.empty() && spans.paused.size() == spans.paused_running.size() &&
                 (count == 0 || (spans.piece_depths.size() == count && spans.pieces.size() == count));
    for (size_t k = 0; whole && k < spans.paused.size(); ++k)
      whole = spans.paused[k] < count && (k == 0 || spans.paused[k - 1] < spans.paused[k]);
    if (!whole) throw IndexCacheDamaged("its spans' columns do not match");
  }

  // The sizes agree and each row's tasks lie within `order` (task indexes are checked where read).
  static void check_time_rows(const TaskTimeRows& rows, size_t tasks, size_t processes) {
    bool whole = rows.row.size() == tasks && rows.order.size() == tasks && rows.begins.size() == tasks &&
                 rows.ends.size() == tasks && rows.failed_before.size() == tasks + 1 &&
                 rows.cancelled_before.size() == tasks + 1 && !rows.first.empty() && rows.first.back() == tasks &&
                 rows.process_first.size() == processes + 1 && rows.process_first.back() == rows.count();
    for (size_t k = 0; whole && k < rows.count(); ++k) whole = rows.first[k] <= rows.first[k + 1];
    for (size_t p = 0; whole && p < processes; ++p) whole = rows.process_first[p] <= rows.process_first[p + 1];
    if (!whole) throw IndexCacheDamaged("its tasks by time do not match its tasks");
  }
};

std::string IndexCache::identity(const std::string& top, const std::vector<std::string>& trace_directories) {
  std::string identity = fmt::format("chronicle view index {}\n", kFormatVersion);
  for (const std::string& directory : trace_directories) {
    identity += fmt::format("trace {}\n", relative_to(top, directory));
    std::vector<std::string> files;
    for_each_trace_file(directory, [&](const std::string& name, const struct stat& info) {
      files.push_back(fmt::format("{} {} {}.{:09}\n", name, info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec));
    });
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) identity += file;
  }
  return identity;
}

void IndexCache::save(const TimelineIndex& index, const std::string& path, const std::string& identity,
                      const std::atomic<bool>* stop) {
  // Created new under a random name and renamed over the old index (format::PrivateFile): as
  // private as the trace files it is made from, and never written through a link.
  format::PrivateFile file(path, format::WhenExists::replace);
  write_file(index, file.fd(), identity, stop,
             [&](CacheWriter& writer, const Column<uint64_t>& records) { Fields::write(writer, index, records); });
  if (stop && stop->load(std::memory_order_relaxed)) throw IndexCacheStopped();
  // On disk before it has the final name: a crash then leaves the old file or none, never a
  // file whose name says whole and whose columns are zeros.
  if (fdatasync(file.fd()) != 0) throw std::runtime_error(system_error("cannot write " + path));
  if (stop && stop->load(std::memory_order_relaxed)) throw IndexCacheStopped();
  file.commit();
}

std::optional<TimelineIndex> IndexCache::load(const std::string& path, const std::string& identity) {
  const std::shared_ptr<const Mapping> mapping = Mapping::open(path);
  if (!mapping) return std::nullopt;
  Header header{};
  std::memcpy(&header, mapping->base(), sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) throw IndexCacheDamaged("not an index file");
  if (header.version != kFormatVersion || header.layout != layout_signature()) return std::nullopt;
  if (checksum_of(mapping->base(), mapping->size()) != header.checksum)
    throw IndexCacheDamaged("its checksum does not match its bytes");
  for (const auto& [offset, size] :
       {std::pair{header.graphs_offset, header.graphs_size}, std::pair{header.fields_offset, header.fields_size}})
    if (offset > mapping->size() || size > mapping->size() - offset)
      throw IndexCacheDamaged("its description lies outside the file");
  CacheReader fields(mapping, header.fields_offset, header.fields_size);
  std::string built_from;
  fields.text(built_from);
  if (built_from != identity) return std::nullopt;
  TimelineIndex index;
  Fields::read(fields, index);
  if (!fields.at_end()) throw IndexCacheDamaged("its description is longer than its fields");
  index.graph_loader_ = std::make_shared<TimelineIndex::GraphLoader>();
  index.graph_loader_->load = [mapping, header] {
    CacheReader reader(mapping, header.graphs_offset, header.graphs_size);
    std::vector<model::TaskGraph> graphs;
    reader.sequence(graphs, [&](model::TaskGraph& graph) { graph = read_graph(reader); });
    return graphs;
  };
  index.graph_loader_->read_task = [mapping, header](uint64_t record) {
    if (record >= header.graphs_size) throw IndexCacheDamaged("a task's record lies outside its graphs");
    CacheReader reader(mapping, header.graphs_offset + record, header.graphs_size - record);
    model::Task task;
    transfer_task(reader, task);
    return task;
  };
  return index;
}

}  // namespace chronicle::viewer
