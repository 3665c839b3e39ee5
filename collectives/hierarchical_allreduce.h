// Hierarchical allreduce: shared memory inside each host, the network across
// hosts.
//
// Called by the runtime's background thread, like collectives::allreduce,
// when a process set has L > 1 ranks on each of H > 1 hosts, each host's
// ranks consecutive in the set (HostLayout::uniform and contiguous,
// collectives/mpi/host_layout.h). Every rank of the set calls it with the
// same count, element size, reduction and options.
//
// Steps, for a buffer of `count` elements cut into L shards (shard i: local
// rank i's, hierarchical_shard() below):
//   1. inside the host: ShmAllreduceGroup::reduce_scatter leaves every
//      local rank i with its host's reduction of shard i (and nothing yet
//      in the other shards of its output);
//   2. across hosts: local rank i allreduces its shard i with local rank i of
//      every other host over `cross` (ring or recursive doubling as
//      `cross_options` pick), applying `finish` to its shard; the L shards
//      cross at once, on L connections per host, so every local rank's link
//      and core carries a share;
//   3. inside the host: ShmAllreduceGroup::allgather_in_place gives every
//      local rank the other shards.
// Per host the network carries 2 (H - 1) / H of the buffer in each
// direction, as a flat ring among hosts would, instead of the flat ring's
// 2 (p - 1) / p per rank, L times over; inside the host the bytes move
// through shared memory: steps 1 and 3 together copy about what one
// shared-memory allreduce of the buffer copies (a reduce-scatter has no copy
// out, the allgather no reduction). docs/design/hierarchical-allreduce.md
// has the cost model and the measurements.
//
// Bits: step 1 combines each host's L values in the reduction order of L
// ranks and step 2 the H host values in the order of H ranks. When L is a
// power of two this is exactly the reduction order of all p = L * H ranks
// (collectives/reduction_order.h), so the result's bits equal every other
// algorithm's; hierarchical_keeps_reduction_order() says when.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/allreduce.h"
#include "collectives/shm/shm_allreduce.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives {

// The ranks a hierarchical allreduce runs on, from one rank's view.
struct HierarchicalGroup {
  // This host's ranks, in set order (local rank = group rank).
  ShmAllreduceGroup* local = nullptr;
  // This rank's peers of the same local rank on every host, in host order
  // (cross rank = host index).
  Transport* cross = nullptr;
};

// Whether the hierarchical allreduce gives the same bits as the flat
// algorithms with `local_size` ranks on each host: local_size a power of two.
bool hierarchical_keeps_reduction_order(int local_size);

// Elements [*begin, *end) of a `count`-element buffer are local rank
// `local_rank`'s shard among `local_size`: as equal as whole elements allow,
// the first count % local_size shards one element longer.
void hierarchical_shard(int64_t count, int local_rank, int local_size, int64_t* begin,
                        int64_t* end);

// Reduces input into output over every rank of every host, as
// collectives::allreduce does (input == output is in place; else they must
// not overlap and input is only read). Fails, naming the rank and the step,
// when a step fails.
[[nodiscard]] Status hierarchical_allreduce(const void* input, void* output, int64_t count,
                                            std::size_t element_size, const ops::ReduceFn& reduce,
                                            const HierarchicalGroup& group,
                                            const AllreduceOptions& cross_options,
                                            const FinishFn& finish = {});

}  // namespace herd::collectives
