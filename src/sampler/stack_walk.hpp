// The frame-pointer walk of the timer sampler's signal handler (timer_sampler.cpp), over a copy of
// the interrupted thread's stack: apart so that tests can give it any bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chronicle::sampler {

// `size` bytes of a thread's stack, copied from `address` (its stack pointer) upward.
struct StackCopy {
  uint64_t address = 0;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
};

// Follows the frame-pointer chain from `frame_pointer` (each frame: the caller's frame pointer,
// then the return address) and writes the return addresses, innermost first, into
// `return_addresses`; returns how many (at most `capacity`). Reads the copy only: a frame must
// lie in it, 8-aligned, and strictly above the frame before it (the first above the stack
// pointer), so that a chain of garbage (code built without frame pointers keeps data in the
// register) ends the walk instead of reading elsewhere or going round in a loop.
uint32_t walk_frame_pointers(const StackCopy& stack, uint64_t frame_pointer, uint64_t* return_addresses,
                             uint32_t capacity);

}  // namespace chronicle::sampler
