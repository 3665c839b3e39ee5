// Threads as the ranks of one ShmAllreduceGroup over a heap area
// (shm_heap_area.h), for the unit tests of the shared-memory collectives.
// Rank threads only record; the test thread checks afterwards.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#include "collectives/shm/shm_allreduce.h"
#include "common/status.h"
#include "shm_heap_area.h"

namespace herd::collectives::testing {

// Runs body(rank, group) on threads for ranks 0 .. callers - 1 of a group of
// p ranks with `slot_bytes` slots and `stall_timeout`; ranks from `callers`
// on never call.
inline void run_shm_ranks(int p, int callers, std::size_t slot_bytes,
                          std::chrono::milliseconds stall_timeout,
                          const std::function<void(int rank, ShmAllreduceGroup& group)>& body) {
  HeapArea area(p, slot_bytes);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < callers; ++rank) {
    threads.emplace_back([&, rank] {
      ShmAllreduceGroup group(rank, area.regions(), slot_bytes, stall_timeout);
      body(rank, group);
    });
  }
  for (auto& thread : threads) thread.join();
}

// The Statuses of ranks 0 and 1 of three running `call` (256-byte slots, a
// 200 ms stall timeout) while rank 2 never calls.
inline std::vector<Status> statuses_without_rank2(
    const std::function<Status(ShmAllreduceGroup& group)>& call) {
  std::vector<Status> statuses(2);
  run_shm_ranks(3, 2, 256, std::chrono::milliseconds(200), [&](int rank, ShmAllreduceGroup& group) {
    statuses[static_cast<std::size_t>(rank)] = call(group);
  });
  return statuses;
}

}  // namespace herd::collectives::testing
