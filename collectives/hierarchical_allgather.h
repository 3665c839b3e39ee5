// Hierarchical allgather: shared memory inside each host, one exchange
// across hosts.
//
// Called like ring_allgatherv (collectives/allgather.h), by every rank of a
// process set of H hosts of L ranks each, each host's ranks consecutive in
// the set (HostLayout::uniform and contiguous, collectives/mpi/host_layout.h),
// with the same bytes_per_rank and segment size. Set rank h * L + i is local
// rank i of host h; host h's blocks form one region of the output.
//
// Steps:
//   1. inside the host: ShmAllreduceGroup::allgather_in_place gives every
//      local rank its host's region;
//   2. across hosts: each host's region is cut into L slices
//      (hierarchical_shard over its bytes); local rank i exchanges slice i
//      of its host's region for slice i of every other host's with local
//      rank i of every other host (the ring allgather over `cross`, each
//      slice sent from and received into its place in the output), so the
//      L slices cross at once on L connections per host;
//   3. inside the host: one allgather_in_place per other host's region,
//      local rank i holding slice i, gives every local rank all of it.
// Per host the network carries (H - 1) / H of the output in each direction,
// split over L connections, instead of the flat ring's (p - 1) / p of it on
// the one link between neighbouring hosts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/hierarchical_allreduce.h"
#include "common/status.h"

namespace herd::collectives {

// Gathers every rank's `input` into `output` as ring_allgatherv does:
// bytes_per_rank has one entry per rank of the set, input holds this rank's
// bytes, output their sum, rank r's block starting at the sum of
// bytes_per_rank[0..r). input may be this rank's block inside output (in
// place) or disjoint from it. Fails naming the step, the local rank and the
// host, with the step's error.
[[nodiscard]] Status hierarchical_allgatherv(const void* input, void* output,
                                             const std::vector<int64_t>& bytes_per_rank,
                                             const HierarchicalGroup& group,
                                             std::size_t segment_bytes = kDefaultSegmentBytes);

}  // namespace herd::collectives
