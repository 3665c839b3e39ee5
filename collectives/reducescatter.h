// Reducescatter over a Transport: every rank contributes a whole buffer of
// p consecutive blocks, and rank i receives block i of the element-wise
// reduction of all ranks' buffers.
//
// Called by the runtime's background thread (one collective at a time per
// Transport). Every rank must call with the same counts_per_rank, element
// size, reduction and segment size.
//
// Bandwidth-optimal: the reduce-scatter phase of ring allreduce
// (collectives/reduce_scatter_phase.h), with the blocks given by
// counts_per_rank instead of equal chunks: every rank sends block b of its
// buffer straight to rank b, which folds the p contributions into output.
// The name keeps "ring" from the algorithm it shares with ring allreduce.
//
// The result is deterministic: every element is reduced in the reduction
// order of collectives/reduction_order.h, the same as every allreduce
// algorithm's, whatever the block, segment size or offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives {

// Reduces `buf` across the ranks and writes this rank's block of the result
// to `output`. buf holds sum(counts_per_rank) elements of element_size bytes,
// block i (counts_per_rank[i] elements, i = 0..p-1) right after block i - 1;
// it is only read, except where output lies inside it. output holds
// counts_per_rank[rank] elements; it may be this rank's block inside buf (in
// place) or disjoint from buf. counts_per_rank has one entry per rank, each
// >= 0; zero-element blocks are legal, as is a total of zero. A failed
// transfer returns its Status with "ring reducescatter reduce-scatter", the
// segment as the step, rank and peer in the message.
[[nodiscard]] Status ring_reducescatter(void* buf, void* output,
                                        const std::vector<int64_t>& counts_per_rank,
                                        std::size_t element_size, const ops::ReduceFn& reduce,
                                        Transport& transport,
                                        std::size_t segment_bytes = kDefaultSegmentBytes);

}  // namespace herd::collectives
