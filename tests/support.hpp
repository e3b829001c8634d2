// Helpers shared by the tests: temporary directories, running commands, reading traces back.
#pragma once

#include <arpa/inet.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "chronicle/config.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::test {

// A connection to 127.0.0.1:PORT that sends half a request line and then nothing, as a slowloris
// client does; -1 when it cannot connect. The caller closes it.
inline int open_idle_connection(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  constexpr char kHalfRequest[] = "GET /metr";
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::send(fd, kHalfRequest, sizeof kHalfRequest - 1, MSG_NOSIGNAL) < 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Slowloris clients: COUNT connections to 127.0.0.1:PORT that send one more header byte each
// second from a thread of their own (under any per-read timeout), until destroyed.
class TricklingConnections {
 public:
  TricklingConnections(uint16_t port, int count) {
    for (int i = 0; i < count; ++i)
      if (const int fd = open_idle_connection(port); fd >= 0) fds_.push_back(fd);
    trickler_ = std::thread([this] {
      std::unique_lock lock(mutex_);
      while (!stop_wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; }))
        for (const int fd : fds_) ::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    });
  }
  ~TricklingConnections() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    stop_wake_.notify_all();
    trickler_.join();
    for (const int fd : fds_) ::close(fd);
  }
  TricklingConnections(const TricklingConnections&) = delete;
  TricklingConnections& operator=(const TricklingConnections&) = delete;
  size_t opened() const { return fds_.size(); }

 private:
  std::vector<int> fds_;
  std::mutex mutex_;
  std::condition_variable stop_wake_;
  bool stopping_ = false;
  std::thread trickler_;
};

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "chronicle-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Most tests count a program's events exactly: the session's own counters (category "chronicle",
// docs/control.md) are left out of them, here for sessions in the test's process and, through the
// environment every child inherits, for the programs the tests run. The SelfStats tests turn them
// on again (and a test may set CHRONICLE_SELF_STATS_INTERVAL on its own command line).
inline const bool kSelfStatsOffInTests = (setenv("CHRONICLE_SELF_STATS_INTERVAL", "0", 0), true);

// An in-process session whose collector writes DIRECTORY/trace, its mapping in DIRECTORY.
inline Config test_config(const TemporaryDirectory& directory) {
  Config config;
  config.output = directory / "trace";
  config.shm_dir = directory.path();
  config.self_stats_interval = std::chrono::milliseconds(0);
  return config;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

// A file's bytes; empty when it cannot be read.
// Makes the event at `offset` of the stream file `path` one of id kUnknownEventId, which no format
// version declares: every compact id names an event, so it takes an extended header (13 bytes,
// over the event's own and what follows), whose time is the latest there is so that no other
// check fails before the id does. False when the file could not be written.
inline constexpr uint32_t kUnknownEventId = 99;
inline bool write_unknown_event(const std::string& path, uint64_t offset) {
  std::array<uint8_t, format::kExtendedHeaderSize> header{};
  const uint64_t ticks = ~uint64_t{0};
  format::write_event_header(header.data(), false, kUnknownEventId, ticks);
  std::FILE* file = std::fopen(path.c_str(), "r+b");
  if (!file) return false;
  const bool written = std::fseek(file, static_cast<long>(offset), SEEK_SET) == 0 &&
                       std::fwrite(header.data(), 1, header.size(), file) == header.size();
  return std::fclose(file) == 0 && written;
}

inline std::string slurp(const std::string& path) {
  std::string text;
  if (FILE* file = std::fopen(path.c_str(), "rb")) {
    std::array<char, 4096> buffer;
    size_t n;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), file)) > 0) text.append(buffer.data(), n);
    std::fclose(file);
  }
  return text;
}

// Visits every event as the stream files of `trace` store it (a compound event as one), file after
// file, with `file_begins` true for a file's first event. Throws std::runtime_error at a packet
// that frames nothing.
template <typename Visit>
void for_each_stored_event(const reader::Trace& trace, Visit visit) {
  for (const auto& stream : trace.streams())
    for (const auto& file : stream.files) {
      const std::string bytes = slurp(file);
      const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
      bool file_begins = true;
      for (size_t offset = 0; offset < bytes.size();) {
        const auto size = format::framed_packet_size(data + offset, bytes.size() - offset);
        if (!size) throw std::runtime_error(file + ": a packet that frames nothing at " + std::to_string(offset));
        const auto& header = *reinterpret_cast<const format::PacketHeader*>(data + offset);
        format::PacketDecoder decoder(data + offset, format::content_bytes(header));
        for (format::RawEvent raw; decoder.next(raw); file_begins = false) visit(raw, file_begins);
        offset += *size;
      }
    }
}

// Runs a shell command line, capturing both outputs.
inline CommandResult run(const std::string& command) {
  TemporaryDirectory scratch;
  const std::string full = command + " >" + (scratch / "out") + " 2>" + (scratch / "err");
  CommandResult result;
  const int status = std::system(full.c_str());
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(scratch / "out");
  result.err = slurp(scratch / "err");
  return result;
}

// Runs a shell command line (exec'd, so the returned pid is the command's own) with its standard
// error a pipe nobody reads, SIGPIPE at its default, as in `command 2>&1 | head -1` once head has
// gone; returns the pid and the wait status.
struct BrokenStderrResult {
  pid_t pid = -1;
  int status = 0;
  bool killed() const { return WIFSIGNALED(status); }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};
inline BrokenStderrResult run_with_broken_stderr(const std::string& command) {
  BrokenStderrResult result;
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) return result;
  close(pipe_ends[0]);
  const std::string line = "exec " + command;
  result.pid = fork();
  if (result.pid == 0) {
    dup2(pipe_ends[1], STDERR_FILENO);
    close(pipe_ends[1]);
    signal(SIGPIPE, SIG_DFL);
    execl("/bin/sh", "sh", "-c", line.c_str(), nullptr);
    _exit(127);
  }
  close(pipe_ends[1]);
  if (result.pid > 0) waitpid(result.pid, &result.status, 0);
  return result;
}

// Whether this process may open a perf event on itself (perf_event_paranoid, seccomp).
inline std::string perf_events_refused() {
  perf_event_attr attributes{};
  attributes.size = sizeof attributes;
  attributes.type = PERF_TYPE_SOFTWARE;
  attributes.config = PERF_COUNT_SW_DUMMY;
  attributes.exclude_kernel = 1;
  const long fd = syscall(SYS_perf_event_open, &attributes, 0, -1, -1, 0);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    return {};
  }
  return std::string("perf events are not allowed here (") + std::strerror(errno) +
         "; see /proc/sys/kernel/perf_event_paranoid)";
}

#define SKIP_WITHOUT_PERF_EVENTS() \
  if (const std::string refused = ::chronicle::test::perf_events_refused(); !refused.empty()) GTEST_SKIP() << refused

// A shell prefix that caps a command's address space at `kilobytes` (ulimit -v): a tool that reads
// without a bound fails fast instead of taking the machine's memory. Nothing under ASan or TSan,
// whose shadow memory needs terabytes of address space; there the test's timeout bounds it.
inline std::string address_space_cap(long kilobytes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)kilobytes;
  return "";
#else
  return "ulimit -v " + std::to_string(kilobytes) + "; ";
#endif
}

inline size_t count_lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// A second user for the test's life, who may write where the test lets it.
class SecondUser {
 public:
  SecondUser() : name_("chron-t" + std::to_string(getpid())) {
    if (geteuid() != 0) {
      why_not_ = "needs root (useradd)";
      return;
    }
    const auto made = run("useradd --no-create-home --shell /usr/sbin/nologin " + name_);
    if (made.exit_code != 0) why_not_ = "useradd failed: " + made.err;
  }
  ~SecondUser() {
    if (why_not_.empty()) run("userdel " + name_);
  }
  const std::string& why_not() const { return why_not_; }
  const std::string& name() const { return name_; }
  // A shell command line that runs `command` as this user.
  std::string as(const std::string& command) const { return "runuser -u " + name_ + " -- " + command; }

 private:
  std::string name_;
  std::string why_not_;
};

// All events of a trace, in time order.
inline std::vector<reader::Event> read_all(const reader::Trace& trace) {
  std::vector<reader::Event> events;
  trace.for_each_event([&](const reader::Event& event) {
    events.push_back(event);
    return true;
  });
  return events;
}

// The events of one category: a program's, without the session's own counters ("chronicle").
inline std::vector<reader::Event> read_category(const reader::Trace& trace, std::string_view category) {
  std::vector<reader::Event> events;
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (site && site->category == category) events.push_back(event);
    return true;
  });
  return events;
}

}  // namespace chronicle::test
