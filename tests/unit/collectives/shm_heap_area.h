// The shared area of p thread-ranks for unit tests of the shared-memory
// allreduce: p regions of shm_region_bytes(slot_bytes) on the heap,
// page-aligned, counters zero and pids set, as make_node_shm leaves them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include <unistd.h>

#include "collectives/shm/shm_allreduce.h"

namespace herd::collectives::testing {

class HeapArea {
 public:
  HeapArea(int p, std::size_t slot_bytes)
      : region_bytes_(shm_region_bytes(slot_bytes)),
        memory_(static_cast<uint8_t*>(std::aligned_alloc(4096, region_bytes_ * p))) {
    for (int j = 0; j < p; ++j) {
      void* region = memory_.get() + region_bytes_ * static_cast<std::size_t>(j);
      new (region) ShmRankControl();
      shm_region_control(region)->pid.value.store(static_cast<uint64_t>(getpid()));
      regions_.push_back(region);
    }
  }
  const std::vector<void*>& regions() const { return regions_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::size_t region_bytes_;
  std::unique_ptr<uint8_t, Free> memory_;
  std::vector<void*> regions_;
};

}  // namespace herd::collectives::testing
