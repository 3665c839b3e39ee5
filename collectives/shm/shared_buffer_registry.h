// The process's shared buffers: memory herd allocates so that the other
// ranks on the machine can map it too (registered memory).
//
// Why: the shared-memory allreduce copies every rank's input into slots (or,
// single copy, reads it with process_vm_readv) because a rank cannot reach
// another process's private memory with plain loads. A buffer allocated here
// lies in a memfd that any process allowed to read this one's memory (the
// same permission as process_vm_readv) opens through /proc/<pid>/fd/<fd> and
// maps; a call whose buffers lie in such buffers on every rank reduces
// straight from the peers' memory (shm_allreduce.h, the direct path).
//
// Each buffer has an id unique in the process for its whole life (ids are
// never reused), so a peer that mapped the buffer behind an fd sees when the
// fd comes to hold another buffer. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/status.h"

namespace herd::collectives {

// A buffer allocated by allocate_shared_buffer.
struct SharedBufferAllocation {
  uint64_t id = 0;  // never 0 for a buffer
  int fd = -1;      // the memfd, open until the buffer is released
  void* data = nullptr;
  std::size_t bytes = 0;  // as asked for; the mapping is rounded up to pages
};

// Where a range of memory lies in the process's shared buffers.
struct SharedBufferRange {
  uint64_t id = 0;
  int fd = -1;
  std::size_t offset = 0;  // of the range's first byte from the buffer's start
};

// Allocates `bytes` (more than 0) of zeroed memory in a new memfd mapped
// shared; fails naming the size and the system call's error.
[[nodiscard]] Status allocate_shared_buffer(std::size_t bytes, SharedBufferAllocation* allocation);

// The buffer holding all of [data, data + bytes), if one does.
std::optional<SharedBufferRange> find_shared_buffer(const void* data, std::size_t bytes);

// Unmaps and closes the buffer that starts at `data` (from
// allocate_shared_buffer); its memory lives on while another process maps it.
void release_shared_buffer(void* data);

}  // namespace herd::collectives
