// Reducescatter over a Transport: every rank contributes a whole buffer of
// p consecutive blocks, and rank i receives block i of the element-wise
// reduction of all ranks' buffers.
//
// Called by the runtime's background thread (one collective at a time per
// Transport). Every rank must call with the same counts_per_rank, element
// size, reduction and segment size.
//
// Ring (bandwidth-optimal, p - 1 steps): the reduce-scatter phase of ring
// allreduce (collectives/ring_phases.h), with the blocks given by
// counts_per_rank instead of equal chunks, and shifted so that rank r owns
// block r. In step s rank r sends block (r - s - 1) mod p to its right
// neighbour and reduces block (r - s - 2) mod p, received from its left
// neighbour, into its copy; after p - 1 steps it holds the finished block r.
//
// The result is deterministic: block b ends as x_b op (x_{b-1} op (... op
// (x_{b+2} op x_{b+1}))), indices mod p, where x_k is rank k's input and
// `a op b` is reduce(dst, a, b), whatever the segment size.
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
// it is used as scratch and left with partial sums. output holds
// counts_per_rank[rank] elements; it may be this rank's block inside buf (in
// place) or disjoint from buf. counts_per_rank has one entry per rank, each
// >= 0; zero-element blocks are legal, as is a total of zero. A failed
// transfer returns its Status with "ring reducescatter reduce-scatter", the
// step, rank and peer in the message.
[[nodiscard]] Status ring_reducescatter(void* buf, void* output,
                                        const std::vector<int64_t>& counts_per_rank,
                                        std::size_t element_size, const ops::ReduceFn& reduce,
                                        Transport& transport,
                                        std::size_t segment_bytes = kDefaultSegmentBytes);

}  // namespace herd::collectives
