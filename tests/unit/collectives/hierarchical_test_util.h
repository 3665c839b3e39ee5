// The hierarchical collectives' harness: H hosts of L thread-ranks, each
// host a shared-memory group over a heap area of its own, each local rank's
// H peers an in-process fabric. Rank threads only record; the test thread
// checks afterwards.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/hierarchical_allreduce.h"
#include "collectives/inproc/inproc_transport.h"
#include <fmt/format.h>

#include "common/status.h"
#include "shm_heap_area.h"

namespace herd::collectives::testing {

struct Layout {
  int hosts;
  int local_size;
  int ranks() const { return hosts * local_size; }
};

// Runs body(rank, group) on hosts * local_size threads: rank h * L + l is
// local rank l of host h, its group a shared-memory group of host h's heap
// area and local rank l's fabric among the hosts. Returns each rank's
// Status.
inline std::vector<Status> run_hierarchical(
    Layout layout, std::size_t slot_bytes, std::chrono::milliseconds stall_timeout,
    std::chrono::milliseconds receive_timeout,
    const std::function<Status(int rank, const HierarchicalGroup& group)>& body) {
  std::vector<std::unique_ptr<HeapArea>> areas;
  for (int h = 0; h < layout.hosts; ++h) {
    areas.push_back(std::make_unique<HeapArea>(layout.local_size, slot_bytes));
  }
  std::vector<std::unique_ptr<InprocFabric>> fabrics;
  for (int l = 0; l < layout.local_size; ++l) {
    fabrics.push_back(std::make_unique<InprocFabric>(layout.hosts, receive_timeout));
  }
  std::vector<Status> statuses(static_cast<std::size_t>(layout.ranks()));
  std::vector<std::thread> threads;
  for (int h = 0; h < layout.hosts; ++h) {
    for (int l = 0; l < layout.local_size; ++l) {
      threads.emplace_back([&, h, l] {
        ShmAllreduceGroup local(l, areas[static_cast<std::size_t>(h)]->regions(), slot_bytes,
                                stall_timeout);
        std::unique_ptr<Transport> cross = fabrics[static_cast<std::size_t>(l)]->transport(h);
        const int rank = h * layout.local_size + l;
        statuses[static_cast<std::size_t>(rank)] =
            body(rank, HierarchicalGroup{&local, cross.get()});
      });
    }
  }
  for (auto& thread : threads) thread.join();
  return statuses;
}

// run_hierarchical with one-minute timeouts for calls whose results the rank
// threads check themselves: body records its rank's first wrong value in
// `failure` and goes on, so that no peer waits for a rank that stopped.
// Returns "" when every rank returned ok and recorded nothing, else the
// lowest such rank's failure or Status.
inline std::string run_hierarchical_checked(
    Layout layout, std::size_t slot_bytes,
    const std::function<Status(int rank, const HierarchicalGroup& group, std::string& failure)>&
        body) {
  std::vector<std::string> failures(static_cast<std::size_t>(layout.ranks()));
  const std::vector<Status> statuses =
      run_hierarchical(layout, slot_bytes, std::chrono::seconds(60), std::chrono::seconds(60),
                       [&](int rank, const HierarchicalGroup& group) {
                         return body(rank, group, failures[static_cast<std::size_t>(rank)]);
                       });
  for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
    if (!statuses[rank].is_ok()) {
      return fmt::format("rank {} failed: {}", rank, statuses[rank].message());
    }
    if (!failures[rank].empty()) return failures[rank];
  }
  return "";
}

}  // namespace herd::collectives::testing
