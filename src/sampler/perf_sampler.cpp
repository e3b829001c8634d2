#include "sampler/perf_sampler.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace chronicle::sampler {
namespace {

// The layout the records follow (perf_event_open(2), "MMAP layout"), for these sample_type bits.
constexpr uint64_t kSampleType = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_STACK_USER;

perf_event_attr make_attributes(const SamplerOptions& options) {
  perf_event_attr attributes{};
  attributes.size = sizeof attributes;
  attributes.type = PERF_TYPE_SOFTWARE;
  if (options.frequency > 0) {
    // CPU time of the task, not wall time: a thread is sampled while it runs.
    attributes.config = PERF_COUNT_SW_CPU_CLOCK;
    // A fixed period of the clock's nanoseconds rather than the kernel's frequency mode, which
    // adapts the period per event and undersamples inherited events (measured: a third of the
    // rate asked for).
    attributes.sample_period = 1'000'000'000ULL / options.frequency;
  } else {
    attributes.config = PERF_COUNT_SW_DUMMY;  // no samples: only the switch records
    attributes.sample_period = 1;
  }
  attributes.sample_type = kSampleType;
  attributes.sample_stack_user = kStackWords * sizeof(uint64_t);
  attributes.inherit = 1;  // threads started later by a followed thread
  // Not its child processes: one under `record` (or with CHRONICLE_SAMPLE inherited) samples
  // itself if it runs chronicle, with its own memory map; following it from here too would
  // sample it twice. Linux 5.13 and later; open() retries without it on older kernels.
  attributes.inherit_thread = 1;
  attributes.exclude_kernel = 1;
  attributes.exclude_hv = 1;
  attributes.sample_id_all = 1;  // switch and lost records carry the thread and the time too
  attributes.context_switch = options.context_switches ? 1 : 0;
  attributes.disabled = 1;   // until enable(): the reader may not be ready for records yet
  attributes.watermark = 1;  // wake a poll() when wakeup_watermark bytes are waiting
  attributes.use_clockid = 1;
  attributes.clockid = CLOCK_MONOTONIC;
  return attributes;
}

int open_event(perf_event_attr& attributes, pid_t thread, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, &attributes, thread, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

std::vector<pid_t> other_threads() {
  std::vector<pid_t> threads;
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  DIR* directory = opendir("/proc/self/task");
  if (!directory) return threads;
  while (const dirent* entry = readdir(directory)) {
    const pid_t thread = static_cast<pid_t>(std::atoi(entry->d_name));
    if (thread > 0 && thread != self) threads.push_back(thread);
  }
  closedir(directory);
  return threads;
}

std::string refusal(int error_number) {
  std::string text = fmt::format("perf_event_open: {}", std::strerror(error_number));
  if (error_number == EACCES || error_number == EPERM)
    text +=
        " (see /proc/sys/kernel/perf_event_paranoid: 2 or less lets a process sample itself; a container "
        "may also forbid perf events)";
  return text;
}

}  // namespace

std::unique_ptr<PerfSampler> PerfSampler::open(const SamplerOptions& options, std::string& error) {
  if (options.frequency == 0 && !options.context_switches) {
    error = "nothing to sample";
    return nullptr;
  }
  std::unique_ptr<PerfSampler> sampler(new PerfSampler);
  const long page = sysconf(_SC_PAGESIZE);
  sampler->data_size_ = size_t{options.ring_pages} * static_cast<size_t>(page);
  perf_event_attr attributes = make_attributes(options);
  attributes.wakeup_watermark = static_cast<uint32_t>(sampler->data_size_ / 4);
  sampler->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sampler->wake_fd_ < 0) {
    error = fmt::format("eventfd: {}", std::strerror(errno));
    return nullptr;
  }
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (int cpu = 0; cpu < cpus; ++cpu) {
    CpuRing ring;
    ring.cpu = cpu;
    ring.fd = open_event(attributes, 0, cpu);
    if (ring.fd < 0 && errno == EINVAL && attributes.inherit_thread) {  // a kernel older than 5.13
      attributes.inherit_thread = 0;
      ring.fd = open_event(attributes, 0, cpu);
    }
    if (ring.fd < 0) {
      if (errno == ENODEV || errno == EINVAL) continue;  // a CPU that is not online
      error = refusal(errno);
      return nullptr;
    }
    ring.size = sampler->data_size_ + static_cast<size_t>(page);
    ring.base = mmap(nullptr, ring.size, PROT_READ | PROT_WRITE, MAP_SHARED, ring.fd, 0);
    if (ring.base == MAP_FAILED) {
      error = fmt::format("cannot map a perf ring of {} KiB: {}", ring.size / 1024, std::strerror(errno));
      ::close(ring.fd);
      return nullptr;
    }
    sampler->rings_.push_back(ring);
  }
  if (sampler->rings_.empty()) {
    error = "perf_event_open: no CPU accepted the event";
    return nullptr;
  }
  // The threads already running: the same events, writing into the calling thread's rings.
  // A thread is followed on every CPU or on none: one followed on some would lose samples unseen.
  for (const pid_t thread : other_threads()) {
    std::vector<int> fds;
    bool followed = true;
    for (const CpuRing& ring : sampler->rings_) {
      perf_event_attr copy = attributes;
      const int fd = open_event(copy, thread, ring.cpu);
      if (fd >= 0) fds.push_back(fd);
      followed = fd >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring.fd) == 0;
      if (!followed) break;
    }
    if (followed) {
      sampler->thread_fds_.insert(sampler->thread_fds_.end(), fds.begin(), fds.end());
      continue;
    }
    for (const int fd : fds) ::close(fd);
    ++sampler->threads_missed_;
  }
  return sampler;
}

void PerfSampler::wait(std::chrono::milliseconds timeout) {
  std::vector<pollfd> waiting;
  waiting.push_back({wake_fd_, POLLIN, 0});
  for (const CpuRing& ring : rings_) waiting.push_back({ring.fd, POLLIN, 0});
  if (poll(waiting.data(), waiting.size(), static_cast<int>(timeout.count())) > 0 && waiting[0].revents) {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t drained = ::read(wake_fd_, &count, sizeof count);
  }
}

void PerfSampler::interrupt() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

PerfSampler::~PerfSampler() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
  for (const int fd : thread_fds_) ::close(fd);
  for (const CpuRing& ring : rings_) {
    munmap(ring.base, ring.size);
    ::close(ring.fd);
  }
}

void PerfSampler::enable() {
  for (const CpuRing& ring : rings_) ioctl(ring.fd, PERF_EVENT_IOC_ENABLE, 0);
  for (const int fd : thread_fds_) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

void PerfSampler::disable() {
  for (const int fd : thread_fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  for (const CpuRing& ring : rings_) ioctl(ring.fd, PERF_EVENT_IOC_DISABLE, 0);
}

void PerfSampler::read(Batch& batch) {
  for (CpuRing& ring : rings_) read_ring(ring, batch);
}

// The ring's protocol (perf_event_open(2)): the kernel writes records and then publishes
// data_head; the reader loads data_head with acquire (the records before it are whole), reads
// them, and stores data_tail with release (the kernel may then overwrite them).
void PerfSampler::read_ring(CpuRing& ring, Batch& batch) {
  auto* control = static_cast<perf_event_mmap_page*>(ring.base);
  const uint8_t* data = static_cast<const uint8_t*>(ring.base) + control->data_offset;
  const uint64_t size = control->data_size;
  const uint64_t head = __atomic_load_n(&control->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = control->data_tail;
  while (tail + sizeof(perf_event_header) <= head) {
    const uint64_t at = tail % size;
    perf_event_header header;
    if (at + sizeof header <= size) {
      std::memcpy(&header, data + at, sizeof header);
    } else {
      uint8_t bytes[sizeof header];
      for (size_t i = 0; i < sizeof header; ++i) bytes[i] = data[(at + i) % size];
      std::memcpy(&header, bytes, sizeof header);
    }
    if (header.size < sizeof header || tail + header.size > head) break;  // never, unless the ring is corrupt
    if (at + header.size <= size) {
      parse(data + at, header.size, batch);
    } else {
      wrapped_.resize(header.size);
      const size_t first = size - at;
      std::memcpy(wrapped_.data(), data + at, first);
      std::memcpy(wrapped_.data() + first, data, header.size - first);
      parse(wrapped_.data(), header.size, batch);
    }
    tail += header.size;
  }
  __atomic_store_n(&control->data_tail, tail, __ATOMIC_RELEASE);
}

namespace {

struct Reader {
  const uint8_t* at;
  const uint8_t* end;
  template <typename T>
  bool take(T& value) {
    if (static_cast<size_t>(end - at) < sizeof value) return false;
    std::memcpy(&value, at, sizeof value);
    at += sizeof value;
    return true;
  }
};

// The sample_id that sample_id_all appends to non-sample records: for kSampleType, pid and tid,
// then the time, at the record's end.
bool read_sample_id(const uint8_t* record, size_t size, Record& out) {
  constexpr size_t kSampleIdSize = 4 + 4 + 8;
  if (size < sizeof(perf_event_header) + kSampleIdSize) return false;
  Reader reader{record + size - kSampleIdSize, record + size};
  return reader.take(out.pid) && reader.take(out.tid) && reader.take(out.time_ns);
}

// PERF_SAMPLE_STACK_USER: the size asked for, that many bytes from the stack pointer, and how many
// of them the kernel could copy.
void read_stack_words(Reader& reader, Record& out, Batch& batch) {
  uint64_t size = 0;
  out.first_stack_word = static_cast<uint32_t>(batch.stack_words.size());
  if (!reader.take(size) || size == 0 || size > static_cast<uint64_t>(reader.end - reader.at)) return;
  const uint8_t* words = reader.at;
  reader.at += size;
  uint64_t copied = 0;
  if (!reader.take(copied)) return;
  const uint64_t count = std::min(copied, size) / sizeof(uint64_t);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t word;
    std::memcpy(&word, words + i * sizeof word, sizeof word);
    batch.stack_words.push_back(word);
  }
  out.stack_word_count = static_cast<uint32_t>(count);
}

}  // namespace

void PerfSampler::parse(const uint8_t* record, size_t size, Batch& batch) {
  perf_event_header header;
  std::memcpy(&header, record, sizeof header);
  Record out;
  switch (header.type) {
    case PERF_RECORD_SAMPLE: {
      Reader reader{record + sizeof header, record + size};
      uint64_t count = 0;
      if (!reader.take(out.pid) || !reader.take(out.tid) || !reader.take(out.time_ns) || !reader.take(count)) return;
      if (count > static_cast<uint64_t>(reader.end - reader.at) / 8) return;
      out.first_frame = static_cast<uint32_t>(batch.frames.size());
      for (uint64_t i = 0; i < count; ++i) {
        uint64_t address = 0;
        reader.take(address);
        if (address >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) continue;  // a marker (PERF_CONTEXT_USER), not a frame
        batch.frames.push_back(address);
      }
      out.frame_count = static_cast<uint32_t>(batch.frames.size() - out.first_frame);
      read_stack_words(reader, out, batch);
      out.type = RecordType::sample;
      break;
    }
    case PERF_RECORD_SWITCH:
      if (!read_sample_id(record, size, out)) return;
      if (!(header.misc & PERF_RECORD_MISC_SWITCH_OUT))
        out.type = RecordType::switch_in;
      else if (header.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
        out.type = RecordType::switch_out_preempted;
      else
        out.type = RecordType::switch_out_blocked;
      break;
    case PERF_RECORD_LOST: {
      Reader reader{record + sizeof header, record + size};
      uint64_t id = 0, lost = 0;
      if (reader.take(id) && reader.take(lost)) batch.lost += lost;
      return;
    }
    case PERF_RECORD_LOST_SAMPLES: {
      Reader reader{record + sizeof header, record + size};
      uint64_t lost = 0;
      if (reader.take(lost)) batch.lost += lost;
      return;
    }
    default:
      return;  // comm, exit, fork, throttle: not used
  }
  batch.records.push_back(out);
}

}  // namespace chronicle::sampler
