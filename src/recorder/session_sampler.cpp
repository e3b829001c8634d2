// ---- The sampling profiler (docs/profiling.md) ---------------------------------------------------
// The perf events are opened by start() on the thread that calls it (the kernel then follows the
// threads it starts), or where they are refused the timers (sampler/timer_sampler.hpp); the
// sampler thread drains their rings every kSamplerPeriod and writes each record as an event of
// its own channel, in time order. Records newer than the watermark (now less
// kSamplerHoldBack) wait for the next round: another CPU's ring may still get an older one, and a
// stream's times never go back. Samples obey category "profile", switches "sched".

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "chronicle/detail/writer.hpp"
#include "format/clock.hpp"
#include "recorder/fork_gate.hpp"
#include "recorder/modules.hpp"
#include "recorder/session_internal.hpp"
#include "sampler/perf_sampler.hpp"
#include "sampler/timer_sampler.hpp"

namespace chronicle {
namespace {

// At most this long between two rounds; sooner when a ring is a quarter full (a burst of switches).
constexpr auto kSamplerPeriod = std::chrono::milliseconds(100);
constexpr uint64_t kSamplerHoldBackNs = 2'000'000;
using sampler::kMaxFrames;

Site g_sample_site{"profile", "cpu_sample", __FILE__, __LINE__, static_cast<uint8_t>(format::SiteKind::instant)};
Site g_switch_site{"sched", "cpu_switch", __FILE__, __LINE__, static_cast<uint8_t>(format::SiteKind::instant)};

// Maps a CLOCK_MONOTONIC time to the session's ticks: from a pair read now, so that the error of
// the frequency estimate applies to milliseconds only.
class TickConverter {
 public:
  explicit TickConverter(const format::ClockCalibration& clock) : clock_(clock) {}
  void refresh() {
    if (!clock_.is_tsc) return;
    frequency_ = static_cast<double>(recorder::refined_frequency(clock_));
    pair_ticks_ = detail::read_ticks();
    pair_ns_ = recorder::read_monotonic_ns();
  }
  uint64_t ticks(uint64_t monotonic_ns) const {
    if (!clock_.is_tsc) return monotonic_ns;
    const double offset_ns = static_cast<double>(static_cast<int64_t>(monotonic_ns - pair_ns_));
    return pair_ticks_ + static_cast<uint64_t>(static_cast<int64_t>(offset_ns * frequency_ / 1e9));
  }

 private:
  format::ClockCalibration clock_;
  double frequency_ = 1e9;
  uint64_t pair_ticks_ = 0;
  uint64_t pair_ns_ = 0;
};

class SampleWriter {
 public:
  explicit SampleWriter(Session& session) : session_(session), ticks_(session.header->clock) {}

  // One round; `last`: everything left (the events are disabled).
  void drain(bool last) {
    ticks_.refresh();
    const uint64_t watermark = last ? UINT64_MAX : recorder::read_monotonic_ns() - kSamplerHoldBackNs;
    session_.stack_sampler->read(pending_);
    define_new_modules();
    std::vector<uint32_t> ready;
    for (uint32_t i = 0; i < pending_.records.size(); ++i)
      if (pending_.records[i].time_ns <= watermark) ready.push_back(i);
    std::stable_sort(ready.begin(), ready.end(), [this](uint32_t a, uint32_t b) {
      return pending_.records[a].time_ns < pending_.records[b].time_ns;
    });
    name_new_threads(ready);
    for (const uint32_t index : ready) write(pending_.records[index]);
    for (uint64_t lost = 0; lost < pending_.lost; ++lost)
      detail::count_discarded(session_.generation, g_sample_site.category_index);
    keep_the_rest(ready);
  }

 private:
  void write(const sampler::Record& record) {
    const bool sample = record.type == sampler::RecordType::sample;
    Site& site = sample ? g_sample_site : g_switch_site;
    ThreadWriter* writer = detail::writer_for(site, session_.generation);
    if (!writer) return;
    uint64_t ticks = ticks_.ticks(record.time_ns);
    if (sample) {
      const uint32_t frames = std::min(record.frame_count, kMaxFrames);
      const format::CpuSamplePrefix prefix{record.pid, record.tid, frames};
      const uint32_t words = record.stack_word_count;
      const size_t frames_size = frames * sizeof(uint64_t);
      const size_t size = sizeof prefix + frames_size + sizeof words + words * sizeof(uint64_t);
      uint8_t* out = detail::begin_event(*writer, site.category_index,
                                         static_cast<uint32_t>(format::EventId::cpu_sample), size, ticks);
      if (!out) return;
      uint8_t* at = out;
      std::memcpy(at, &prefix, sizeof prefix);
      at += sizeof prefix;
      std::memcpy(at, pending_.frames.data() + record.first_frame, frames_size);
      at += frames_size;
      std::memcpy(at, &words, sizeof words);
      at += sizeof words;
      std::memcpy(at, pending_.stack_words.data() + record.first_stack_word, words * sizeof(uint64_t));
      detail::commit_event(*writer, site.category_index, out + size, ticks);
      return;
    }
    const format::CpuState state = record.type == sampler::RecordType::switch_in ? format::CpuState::running
                                   : record.type == sampler::RecordType::switch_out_preempted
                                       ? format::CpuState::preempted
                                       : format::CpuState::blocked;
    const format::CpuSwitchPayload payload{record.pid, record.tid, static_cast<uint8_t>(state)};
    uint8_t* out = detail::begin_event(*writer, site.category_index, static_cast<uint32_t>(format::EventId::cpu_switch),
                                       sizeof payload, ticks);
    if (!out) return;
    std::memcpy(out, &payload, sizeof payload);
    detail::commit_event(*writer, site.category_index, out + sizeof payload, ticks);
  }

  // Threads that never wrote a trace point have no definition yet: named from /proc, so that the
  // profile names them (a thread of a child process keeps its number).
  void name_new_threads(const std::vector<uint32_t>& ready) {
    std::vector<std::pair<uint32_t, std::string>> names;
    for (const uint32_t index : ready) {
      const sampler::Record& record = pending_.records[index];
      if (!named_threads_.insert(record.tid).second || record.pid != static_cast<uint32_t>(getpid())) continue;
      std::string name = read_small_file(fmt::format("/proc/self/task/{}/comm", record.tid));
      if (!name.empty() && name.back() == '\n') name.pop_back();
      if (!name.empty()) names.emplace_back(record.tid, std::move(name));
    }
    if (names.empty()) return;
    Registry& reg = registry();
    SlowPathScope scope;
    std::lock_guard lock(reg.mutex);
    if (reg.session.get() != &session_) return;
    for (const auto& [tid, name] : names) define_thread(session_, static_cast<int32_t>(tid), name);
  }

  void define_new_modules() {
    const uint64_t loads = recorder::module_load_count();
    if (loads == module_loads_) return;
    module_loads_ = loads;
    std::vector<recorder::LoadedModule> fresh;
    for (recorder::LoadedModule& module : recorder::loaded_modules())
      if (defined_modules_.insert({module.base, module.path}).second) fresh.push_back(std::move(module));
    if (fresh.empty()) return;
    Registry& reg = registry();
    SlowPathScope scope;
    std::lock_guard lock(reg.mutex);
    if (reg.session.get() != &session_) return;
    for (const recorder::LoadedModule& module : fresh) {
      std::string payload;
      append_value(payload, format::ModuleDefinitionPrefix{module.base, module.start, module.end});
      append_string(payload, module.build_id);
      append_string(payload, module.path);
      write_definition(session_, format::DefinitionId::module, payload);
    }
  }

  void keep_the_rest(const std::vector<uint32_t>& written) {
    sampler::Batch rest;
    std::vector<bool> done(pending_.records.size(), false);
    for (const uint32_t index : written) done[index] = true;
    for (uint32_t i = 0; i < pending_.records.size(); ++i) {
      if (done[i]) continue;
      sampler::Record record = pending_.records[i];
      const auto first = pending_.frames.begin() + record.first_frame;
      record.first_frame = static_cast<uint32_t>(rest.frames.size());
      rest.frames.insert(rest.frames.end(), first, first + record.frame_count);
      const auto first_word = pending_.stack_words.begin() + record.first_stack_word;
      record.first_stack_word = static_cast<uint32_t>(rest.stack_words.size());
      rest.stack_words.insert(rest.stack_words.end(), first_word, first_word + record.stack_word_count);
      rest.records.push_back(record);
    }
    pending_ = std::move(rest);
  }

  static std::string read_small_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buffer[64];
    const ssize_t length = ::read(fd, buffer, sizeof buffer);
    ::close(fd);
    return length > 0 ? std::string(buffer, static_cast<size_t>(length)) : std::string();
  }

  Session& session_;
  TickConverter ticks_;
  sampler::Batch pending_;
  std::set<uint32_t> named_threads_;
  std::set<std::pair<uint64_t, std::string>> defined_modules_;
  uint64_t module_loads_ = ~uint64_t{0};
};

}  // namespace

namespace session_internal {

void run_sampler(Session* session) {
  // Held while this thread works, let go while it waits (fork_gate.hpp): a round allocates.
  recorder::ForkGateScope gate;
  pthread_setname_np(pthread_self(), "chronicle-smp");
  t_is_session_thread = true;
  // The channel first, so that its first packet begins before the first record it will hold.
  detail::attach_thread(detail::t_writer, session->generation);
  session->stack_sampler->enable();
  SampleWriter writer(*session);
  std::unique_lock lock(session->sampler_mutex);
  session->sampler_ready = true;
  session->sampler_wake.notify_all();
  while (!session->sampler_stop) {
    lock.unlock();
    recorder::test_pause(recorder::TestPoint::sampler_draining);
    writer.drain(false);
    gate.unlock();
    session->stack_sampler->wait(kSamplerPeriod);
    gate.lock();
    lock.lock();
  }
  lock.unlock();
  session->stack_sampler->disable();
  writer.drain(true);
}

}  // namespace session_internal

namespace {

// Where the session's perf events are refused, the timers (docs/profiling.md): stacks only.
std::unique_ptr<sampler::Sampler> open_timer_sampler(const sampler::SamplerOptions& options) {
  std::string error;
  std::unique_ptr<sampler::Sampler> timers = sampler::TimerSampler::open(options, error);
  if (!timers) {
    fmt::print(stderr, "chronicle: no samples: {}\n", error);
    return nullptr;
  }
  if (options.context_switches)
    fmt::print(stderr, "chronicle: no context switches: only perf events see them, not the timer sampler\n");
  return timers;
}

}  // namespace

namespace session_internal {

// Opens the perf events on the calling thread (start()'s), before the session's own threads exist:
// they are followed too, so the tracer's own CPU time shows in the profile. Where the kernel
// refuses them, Config::sample_method (automatic) falls back to the timers, if there is a rate.
void open_sampler(Session& session) {
  sampler::SamplerOptions options;
  options.frequency = session.config.sample_frequency;
  options.context_switches = session.config.context_switches;
  const SampleMethod method = session.config.sample_method;
  std::string refused;
  if (method != SampleMethod::timer) session.stack_sampler = sampler::PerfSampler::open(options, refused);
  if (!session.stack_sampler && method != SampleMethod::timer) {
    if (method == SampleMethod::perf || options.frequency == 0) {
      fmt::print(stderr, "chronicle: no samples nor context switches: {}\n", refused);
      return;
    }
    fmt::print(stderr, "chronicle: {}: sampling with timer_create and {} instead\n", refused,
               sampler::TimerSampler::kSignalName);
  }
  if (!session.stack_sampler) session.stack_sampler = open_timer_sampler(options);
  if (!session.stack_sampler) return;
  if (const uint32_t missed = session.stack_sampler->threads_missed())
    fmt::print(stderr, "chronicle: {} thread(s) running before the session are not sampled\n", missed);
}

// The program's threads started after start() returns are then followed from their first
// instruction (by perf events; the timers find them at the sampler's next round). Bounded: a
// sampler thread that is slow to run costs samples, not the program.
void wait_for_sampler(Session& session) {
  if (!session.sampler_started) return;
  std::unique_lock lock(session.sampler_mutex);
  session.sampler_wake.wait_for(lock, std::chrono::seconds(1), [&session] { return session.sampler_ready; });
}

// Before stop() retires the session: the sampler's last round is written into it.
void end_sampler_thread(Session& session) {
  if (!session.stack_sampler || session.sampler_ended.exchange(true)) return;
  if (session.sampler_thread.joinable()) {
    {
      std::lock_guard lock(session.sampler_mutex);
      session.sampler_stop = true;
    }
    session.stack_sampler->interrupt();
    recorder::join_recorder_thread(session.sampler_thread);
  }
  session.stack_sampler.reset();  // its rings, descriptors, timers: a retired session keeps nothing
}

}  // namespace session_internal
}  // namespace chronicle
