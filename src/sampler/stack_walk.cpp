#include "sampler/stack_walk.hpp"

#include <cstring>

namespace chronicle::sampler {

uint32_t walk_frame_pointers(const StackCopy& stack, uint64_t frame_pointer, uint64_t* return_addresses,
                             uint32_t capacity) {
  constexpr uint64_t kFrameSize = 2 * sizeof(uint64_t);  // the caller's frame pointer, the return address
  uint64_t lowest = stack.address;                       // where the next frame may start
  uint32_t count = 0;
  while (count < capacity && frame_pointer >= lowest && frame_pointer % sizeof(uint64_t) == 0) {
    const uint64_t offset = frame_pointer - stack.address;
    if (offset > stack.size || stack.size - offset < kFrameSize) break;
    uint64_t frame[2];
    std::memcpy(frame, stack.bytes + offset, sizeof frame);
    if (frame[1] == 0) break;  // no return address: the outermost frame's end marker
    return_addresses[count++] = frame[1];
    lowest = frame_pointer + kFrameSize;  // strictly above: no loop, no going back down
    frame_pointer = frame[0];
  }
  return count;
}

}  // namespace chronicle::sampler
