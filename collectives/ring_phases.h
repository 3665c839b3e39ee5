// The two phases of the ring algorithms, written once: ring allreduce runs
// reduce-scatter then allgather, ring reducescatter runs reduce-scatter alone
// and ring allgatherv runs allgather alone.
//
// Internal to collectives/ (namespace detail); called on the thread that runs
// the collective.
//
// Terms. p ranks stand in a ring: rank r receives from its left neighbour
// (r - 1) mod p and sends to its right neighbour (r + 1) mod p. The buffer
// holds p blocks, blocks[0..p), given as element ranges of any size (zero
// included); a block travels as segments of at most segment_count elements.
// Rank r owns block (r + owned_block_shift) mod p: ring allreduce uses shift
// 1 (rank r finishes block r + 1), reducescatter and allgatherv shift 0. A
// step is one exchange with both neighbours; each phase takes p - 1 steps.
//
// Reduce-scatter: in step s rank r sends block (r + shift - 1 - s) mod p to
// the right and receives block (r + shift - 2 - s) mod p from the left,
// reducing it into its own copy. The block a rank sends in step s is the one
// it reduced in step s - 1, so after step s it carries the contributions of
// s + 2 ranks, and after p - 1 steps rank r holds the complete reduction of
// the block it owns. The order is fixed: block b, owned by rank o, ends as
// x_o op (x_{o-1} op (... op (x_{o+2} op x_{o+1}))), where x_k is rank k's
// input and `a op b` is reduce(dst, a, b); segment sizes do not change
// it.
//
// Allgather: rank r starts with the complete block it owns; in step s it
// sends block (r + shift - s) mod p to the right and receives block
// (r + shift - s - 1) mod p from the left straight into buf, overwriting what
// was there. After step s it holds s + 2 complete blocks, after p - 1 steps
// all of them.
//
// Out of place: the reduce-scatter phase may read the ranks' inputs from a
// separate `input` buffer with the same blocks. Step 0 then sends from input,
// and a received segment lands in buf as input op received; every later send
// is of a block reduced into buf in the step before. A block a rank never
// receives in this phase (the one it sends in step 0) is left unwritten in buf,
// which the allgather phase then fills. With input == buf it is in place.
//
// Finishing: a `finish_owned` function, if given, is applied to each segment of the
// owned block right after its last reduction, while the segment is still in
// cache (an average's division, a postscale), so the allgather phase carries
// finished values and nobody makes another pass over the whole buffer.
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
#include "ops/reduce.h"

namespace herd::collectives::detail {

struct RingPhase {
  const char* algorithm;  // for error messages, e.g. "ring allreduce"
  int tag;                // from collectives/tags.h
  int64_t segment_count;  // elements per segment, >= 1
  int owned_block_shift;  // rank r owns block (r + owned_block_shift) mod p
};

// segment_bytes rounded down to whole elements, at least one.
int64_t segment_count_for(std::size_t segment_bytes, std::size_t element_size);

// Applied to `count` elements at `data` of the owned block once they hold
// the complete reduction.
using SegmentFn = std::function<void(void* data, int64_t count)>;

// The reduce-scatter phase from input (== buf for in place) into buf.
// `finish_owned` may be empty. Failures name phase.algorithm, "reduce-scatter", the step,
// rank and peer.
[[nodiscard]] Status ring_reduce_scatter_phase(const void* input, void* buf,
                                               const std::vector<Range>& blocks,
                                               std::size_t element_size,
                                               const ops::ReduceFn& reduce, Transport& transport,
                                               const RingPhase& phase,
                                               const SegmentFn& finish_owned = {});

// The allgather phase over buf. Failures name phase.algorithm, "allgather",
// the step, rank and peer.
[[nodiscard]] Status ring_allgather_phase(void* buf, const std::vector<Range>& blocks,
                                          std::size_t element_size, Transport& transport,
                                          const RingPhase& phase);

}  // namespace herd::collectives::detail
