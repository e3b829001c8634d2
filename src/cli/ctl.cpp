// `chronicle ctl PID|SHM status|enable|disable|level`: a running program's categories, switched
// through its own mapping with no daemon. The program's control thread applies a change and
// answers; ctl returns once the change is in effect (layout.hpp, "The control block").
#include <linux/futex.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>

#include "cli/common.hpp"
#include "collector/collector.hpp"
#include "format/category_rules.hpp"
#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"

namespace chronicle::cli {
namespace {

constexpr auto kAnswerLimit = std::chrono::seconds(5);

struct CtlOptions {
  std::string target;
  std::string pattern;
  unsigned level = 0;
  std::string output;  // snapshot
};

bool is_pid(const std::string& target) {
  return !target.empty() && std::all_of(target.begin(), target.end(), ::isdigit);
}

// Only the caller's own sessions, in files no one else may write: a request is a write into
// another program's control block, and what it finds there is read back as the answer.
void check_ours(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw std::runtime_error(fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
  if (info.st_uid != geteuid())
    throw std::runtime_error(
        fmt::format("refused {}: it belongs to uid {}, and ctl changes only its own user's (uid {}) "
                    "programs; run it as that user",
                    path, info.st_uid, geteuid()));
  if ((info.st_mode & 077) != 0)
    throw std::runtime_error(
        fmt::format("refused {}: mode {:04o} lets other users change it; a chronicle session is made 0600", path,
                    info.st_mode & 07777));
}

std::unique_ptr<collector::SessionMapping> open_session(const std::string& target) {
  if (!is_pid(target)) {
    check_ours(target);
    return std::make_unique<collector::SessionMapping>(target);
  }
  const int pid = recorded_program_or_itself(std::stoi(target));
  const uid_t owner = shm::expected_mapping_owner(pid);
  if (owner != geteuid())
    throw std::runtime_error(
        fmt::format("refused process {}: it runs as uid {}, and ctl changes only its own user's (uid {}) programs", pid,
                    owner, geteuid()));
  auto mapping = open_session_of(pid);
  check_ours(mapping->path());
  return mapping;
}

int run_status(const CtlOptions& options) {
  const auto mapping = open_session(options.target);
  const auto& header = mapping->header();
  fmt::print("process {} ({}), {}\n", header.pid, header.process_name,
             mapping->writer_alive() ? "running" : "not running");
  const std::vector<collector::CategoryView> categories = mapping->categories();
  if (categories.empty()) {
    fmt::print("no category yet: they are listed from their first trace point on\n");
    return 0;
  }
  size_t width = std::string_view("CATEGORY").size();
  for (const auto& category : categories) width = std::max(width, category.name.size());
  // Counts since the session began, exact: what the program's threads wrote into their rings, and
  // lost with a ring (threads refused one are counted apart, below).
  fmt::print("{:<{}}  {:<10} {:>14} {:>14} {:>10}\n", "CATEGORY", width, "STATE", "EVENTS", "BYTES", "DISCARDED");
  for (const auto& category : categories)
    fmt::print("{:<{}}  {:<10} {:>14} {:>14} {:>10}\n", category.name, width,
               format::describe_category_state(category.state), category.events, category.bytes, category.discarded);
  if (const uint64_t no_channel = header.events_no_channel.load(std::memory_order_relaxed); no_channel != 0)
    fmt::print("{} events of threads without a ring (more threads than max_threads, or no memory) were lost\n",
               no_channel);
  return 0;
}

constexpr uint64_t kControlOwnerOffset = offsetof(format::ShmHeader, control_owner);

// Takes the control block for this process. The block is a role held by a lock on the file
// (shm::take_role), so a ctl that died holding it is replaced at once, whatever became of its
// pid; control_owner only names the holder.
void take_control_block(collector::SessionMapping& mapping) {
  format::ShmHeader& header = mapping.header();
  const auto deadline = std::chrono::steady_clock::now() + kAnswerLimit;
  while (!shm::take_role(mapping.fd(), kControlOwnerOffset)) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(fmt::format("another ctl (pid {}) keeps talking to process {}",
                                           header.control_owner.load(std::memory_order_relaxed), header.pid));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  header.control_owner.store(static_cast<uint32_t>(getpid()), std::memory_order_release);
}

void give_back_control_block(collector::SessionMapping& mapping) {
  mapping.header().control_owner.store(0, std::memory_order_release);
  shm::give_up_role(mapping.fd(), kControlOwnerOffset);
}

enum class Exchange { answered, withdrawn, taken_unanswered };

// Sends the request and waits for its answer. Its number is this ctl's alone (control_numbers),
// so an answer to an earlier ctl's request, however late, is never taken for this one's. With no
// answer in time the request is withdrawn, unless the program took it already.
Exchange exchange(collector::SessionMapping& mapping, format::ControlRequest request) {
  format::ShmHeader& header = mapping.header();
  uint32_t mine = 0;
  while (mine == 0) mine = header.control_numbers.fetch_add(1, std::memory_order_relaxed) + 1;  // 0: no request
  // A seqlock's writer (layout.hpp): the number 0, then the bytes, then the number (release), so
  // a program that copied bytes of this request under an older number fails to take it.
  std::atomic_ref<uint32_t> number(header.control_request.number);
  number.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(reinterpret_cast<char*>(&header.control_request) + sizeof request.number,
              reinterpret_cast<const char*>(&request) + sizeof request.number, sizeof request - sizeof request.number);
  number.store(mine, std::memory_order_release);
  header.control_requests.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header.control_requests), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  const auto deadline = std::chrono::steady_clock::now() + kAnswerLimit;
  for (;;) {
    const uint32_t answered = header.control_answered.load(std::memory_order_acquire);
    if (answered == mine) return Exchange::answered;
    if (std::chrono::steady_clock::now() > deadline || !mapping.writer_alive()) break;
    const timespec slice{0, 10'000'000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header.control_answered), FUTEX_WAIT, answered, &slice, nullptr, 0);
  }
  // The program takes a request by a compare-exchange of its number to 0: exactly one of it and
  // this withdrawal wins.
  uint32_t expected = mine;
  if (number.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return Exchange::withdrawn;
  return header.control_answered.load(std::memory_order_acquire) == mine ? Exchange::answered
                                                                         : Exchange::taken_unanswered;
}

int run_change(const CtlOptions& options, uint8_t state) {
  if (options.pattern.size() >= format::kControlPatternSize)
    throw std::invalid_argument(
        fmt::format("pattern '{}' is longer than {} characters", options.pattern, format::kControlPatternSize - 1));
  const auto mapping = open_session(options.target);
  format::ShmHeader& header = mapping->header();
  if (!mapping->writer_alive() || mapping->finished())
    throw std::runtime_error(
        fmt::format("process {}'s session is not running: there is nothing to switch", header.pid));
  format::ControlRequest request{};
  request.command = format::ControlCommand::set_category_state;
  request.state = state;
  std::memcpy(request.pattern, options.pattern.data(), options.pattern.size());
  take_control_block(*mapping);
  const Exchange outcome = exchange(*mapping, request);
  const bool answered = outcome == Exchange::answered;
  std::string answer;
  format::ControlStatus status = format::ControlStatus::refused;
  if (answered) {
    char text[format::kControlAnswerSize];
    std::memcpy(text, header.control_answer, sizeof text);
    text[sizeof text - 1] = '\0';
    answer = text;
    status = header.control_status.load(std::memory_order_relaxed);
  }
  give_back_control_block(*mapping);
  if (outcome == Exchange::withdrawn)
    throw std::runtime_error(
        fmt::format("process {} did not answer within {} s (stopped, its session ending, or "
                    "started without a control thread): request withdrawn, nothing changed",
                    header.pid, kAnswerLimit.count()));
  if (outcome == Exchange::taken_unanswered)
    throw std::runtime_error(
        fmt::format("process {} took the request but did not answer within {} s (stopped?): "
                    "the change takes effect when it goes on",
                    header.pid, kAnswerLimit.count()));
  if (status != format::ControlStatus::ok) {
    fmt::print(stderr, "chronicle: process {} refused: {}\n", header.pid, answer);
    return kExitFailure;
  }
  fmt::print("{}\n", answer);
  return 0;
}

}  // namespace

Command add_ctl(CLI::App& app) {
  auto options = std::make_shared<CtlOptions>();
  CLI::App* command =
      app.add_subcommand("ctl", "Switch a running program's categories on and off, with no restart and no daemon");
  command->add_option("target", options->target, "A process id, or the path of a chronicle .shm mapping")->required();
  command->require_subcommand(1);
  CLI::App* status = command->add_subcommand("status", "List the program's categories and their states");
  CLI::App* enable = command->add_subcommand("enable", "Record the categories that match PATTERN (level 0)");
  CLI::App* disable = command->add_subcommand("disable", "Stop recording the categories that match PATTERN");
  CLI::App* level = command->add_subcommand("level", "Record PATTERN's trace points up to LEVEL (0-254)");
  CLI::App* snapshot =
      command->add_subcommand("snapshot", "Write what the program's rings hold now, as `chronicle snapshot` does");
  snapshot->add_option("-o,--output", options->output, "Trace directory (default: chronicle-snapshot-PID-TIME)");
  for (CLI::App* change : {enable, disable, level})
    change->add_option("pattern", options->pattern, "Category names, as a glob: 'net.*', 'db', '*'")->required();
  level->add_option("level", options->level, "The highest level recorded")
      ->required()
      ->check(CLI::Range(0u, unsigned{format::kMaxLevel}));
  return {command, [=] {
            if (status->parsed()) return run_status(*options);
            if (snapshot->parsed()) {
              SnapshotOptions snapshot_options{options->target, options->output};
              return run_snapshot(snapshot_options);
            }
            if (enable->parsed()) return run_change(*options, format::category_state_for_level(0));
            if (disable->parsed()) return run_change(*options, format::kCategoryOff);
            return run_change(*options, format::category_state_for_level(static_cast<uint8_t>(options->level)));
          }};
}

}  // namespace chronicle::cli
