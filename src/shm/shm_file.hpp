// The files behind shared mappings (a trace session, a process's metrics): how the writing
// process makes, reserves, maps and locks one, and how a reader learns that its writer is gone.
// The layouts inside are the format's (chronicle/detail/layout.hpp, metrics_layout.hpp); this
// module is only the file, for the recorder, the metrics registry and their readers alike.
//
// The writer holds a shared flock on the file for its whole life. The lock belongs to the open
// file description, which the descriptor and every mapping of it hold: a reader that can take
// the lock exclusively knows that no process holds either any more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace chronicle::shm {

struct Range {
  uint64_t offset;
  uint64_t length;
};

// A file its writer maps shared, read-write.
struct WriterFile {
  std::string path;
  int fd = -1;
  uint8_t* base = nullptr;
  size_t size = 0;
};

// Makes `path` anew (O_EXCL, never through a symbolic link, mode 0600), sizes it to `size`, gives
// the `reserved` ranges real memory now (a sparse file on a full tmpfs turns a later store into
// SIGBUS), maps it and takes the writer's lock. False, with the reason in `error` and no file
// left behind, when any step fails; `error_number` (if given) gets its errno (EEXIST: a file
// already has that name).
bool create_writer_file(const std::string& path, size_t size, std::initializer_list<Range> reserved, WriterFile& out,
                        std::string& error, int* error_number = nullptr);

// Gives [offset, offset + length) of the file real memory. False when there is no room (the
// caller counts what it cannot write instead of touching the range).
bool reserve(int fd, uint64_t offset, uint64_t length);

// The writer is done with the file: its lock is released and its descriptor closed; the mapping
// stays unless `unmap` (a thread may still be writing into it).
void release(WriterFile& file, bool unmap);

// In a child forked without exec: drops the child's references to its parent's file (the
// descriptor and the mapping), so that the lock on it is the parent's alone. flock(LOCK_UN)
// would release the parent's lock too.
void forget_in_forked_child(WriterFile& file);

// In such a child, before forget_in_forked_child: the first `bytes` of the parent's file mapped
// again through a new open of it, which holds none of the parent's locks (a mapping keeps its
// open file, and so its locks, alive). nullptr when it cannot be.
void* map_again_without_locks(const WriterFile& file, size_t bytes);

// For readers: whether a process still holds the writer's lock on the open file `fd`.
bool writer_alive(int fd);

// A role in a mapping that one live process at a time holds (ctl's control block, the collector of
// a session's rings): an open-file-description lock (F_OFD_SETLK, write) on the 4 bytes of the word
// at `word_offset` that names the holder, taken through `fd` (open read-write). The kernel drops it
// when the holder's open file description goes (its last descriptor and mapping: it died, or
// gave the role up), so a holder that died frees the role whatever became of its pid; the word
// keeps the pid only to name the holder. Never kill(pid, 0): a pid may have been reused.
// Takes the role unless another open file description holds it (false then); never waits.
bool take_role(int fd, uint64_t word_offset);
void give_up_role(int fd, uint64_t word_offset);

// The writer's pid in a mapping's file name ("chronicle-PID-N.shm", "chronicle-metrics-PID.shm"),
// or nullopt for a name that is not a mapping's.
std::optional<int> mapping_writer_pid(std::string_view file_name);

}  // namespace chronicle::shm
