// Allgather with variable sizes over a Transport: every rank contributes a
// block of bytes, and every rank receives all blocks, concatenated in rank
// order.
//
// Called by the runtime's background thread (one collective at a time per
// Transport). Every rank must call with the same bytes_per_rank and segment
// size.
//
// Ring (bandwidth-optimal, p - 1 steps): the allgather phase of ring
// allreduce (collectives/ring_phases.h) over blocks of bytes_per_rank[i]
// bytes, rank r owning block r. After copying its own input into its block
// of output, in step s = 0..p-2 rank r sends block (r - s) mod p to its right
// neighbour and receives block (r - s - 1) mod p from its left neighbour
// straight into output, each block as segments of at most segment_bytes.
// A zero-length block has no segments: its sender and receiver both skip it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/transport.h"
#include "common/status.h"

namespace herd::collectives {

// Gathers every rank's `input` into `output`. bytes_per_rank has one entry
// per rank (each >= 0); input holds bytes_per_rank[rank] bytes; output holds
// their sum, rank i's block starting at the sum of bytes_per_rank[0..i). input
// may be this rank's block inside output (in place) or disjoint from output.
// segment_bytes below 1 counts as 1. A failed transfer returns its Status with
// "ring allgatherv allgather", the step, rank and peer in the message.
[[nodiscard]] Status ring_allgatherv(const void* input, void* output,
                                     const std::vector<int64_t>& bytes_per_rank,
                                     Transport& transport,
                                     std::size_t segment_bytes = kDefaultSegmentBytes);

}  // namespace herd::collectives
