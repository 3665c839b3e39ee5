// The allgather phase of the ring algorithms, written once: ring allreduce
// runs it after its reduce-scatter (collectives/reduce_scatter_phase.h) and
// ring allgatherv runs it alone.
//
// Internal to collectives/ (namespace detail); called on the thread that runs
// the collective.
//
// Terms. p ranks stand in a ring: rank r receives from its left neighbour
// (r - 1) mod p and sends to its right neighbour (r + 1) mod p. The buffer
// holds p blocks, blocks[0..p), given as element ranges of any size (zero
// included); a block travels as segments of at most segment_count elements.
// Rank r owns block r. The phase takes p - 1 steps, each one exchange with
// both neighbours.
//
// Allgather: rank r starts with the complete block r; in step s it sends
// block (r - s) mod p to the right and receives block (r - s - 1) mod p from
// the left straight into buf, overwriting what
// was there. After step s it holds s + 2 complete blocks, after p - 1 steps
// all of them. Blocks are copied, never combined, so every rank ends with
// the owners' bits.
//
// An empty block has no segments, so both its sender and its receiver skip
// it. Every rank must pass the same blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/transport.h"
#include "common/status.h"

namespace herd::collectives::detail {

struct RingPhase {
  const char* algorithm;  // for error messages, e.g. "ring allreduce"
  int tag;                // from collectives/tags.h
  int64_t segment_count;  // elements per segment, >= 1
};

// segment_bytes rounded down to whole elements, at least one.
int64_t segment_count_for(std::size_t segment_bytes, std::size_t element_size);

// Applied to `count` elements at `data` of the owned block once they hold
// the complete reduction (collectives/reduce_scatter_phase.h).
using SegmentFn = std::function<void(void* data, int64_t count)>;

// The allgather phase over buf. Failures name phase.algorithm, "allgather",
// the step, rank and peer.
[[nodiscard]] Status ring_allgather_phase(void* buf, const std::vector<Range>& blocks,
                                          std::size_t element_size, Transport& transport,
                                          const RingPhase& phase);

}  // namespace herd::collectives::detail
