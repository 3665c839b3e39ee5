// The reduce-scatter phase of ring allreduce and of reducescatter, written
// once: every rank ends with the complete reduction of the block it owns.
//
// Internal to collectives/ (namespace detail); called on the thread that runs
// the collective.
//
// Terms. The buffer holds p blocks, blocks[0..p), given as element ranges of
// any size (zero included); rank r owns block r. A block travels as segments
// of at most segment_count elements.
//
// Direct exchange: every rank sends segment k of block b of its input
// straight to rank b, for every b but itself, and receives segment k of its
// own block from every other rank. Once all p - 1 contributions of a segment
// have arrived, the owner folds them with its own input in the reduction
// order (collectives/reduction_order.h), so every element of the result is
// the same expression of the ranks' inputs whatever block, segment or buffer
// offset it falls in. A ring reduce-scatter cannot give that: it reduces
// block b along a path that starts at a rank depending on b. Each rank sends
// and receives the same bytes as in a ring reduce-scatter, (p - 1) blocks,
// but in one step: the p - 1 transfers of a segment run at once.
//
// Pipelining: the receives of two segments are in flight at a time, each
// from every peer into receive slots of its own, so segment k + 1 arrives
// while segment k is folded; all sends are posted at the start. The slots
// take 2 (p - 1) segments; from p = 9 on the segment shrinks so that they stay
// within kReduceScatterSlotBudgetBytes.
//
// Out of place, the inputs are read from `input` and the owned block's result
// is written to `owned_output`, which may be the owned block inside input (in
// place) or disjoint from input. No other part of input is written.
//
// Finishing: a `finish_owned` function, if given, is applied to each segment
// of the owned result right after its fold, while it is still in cache (an
// average's division, a postscale).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/ring_phases.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives::detail {

// The most bytes the receive slots of one reduce-scatter may take.
constexpr std::size_t kReduceScatterSlotBudgetBytes = 16 << 20;

struct ReduceScatterPhase {
  const char* algorithm;  // for error messages, e.g. "ring allreduce"
  int tag;                // from collectives/tags.h
  int64_t segment_count;  // elements per segment, >= 1, before the budget
};

// The segment, in elements, that a reduce-scatter of `phase` on `ranks` ranks
// sends: phase.segment_count, shrunk so that 2 (ranks - 1) of them fit
// kReduceScatterSlotBudgetBytes, and at least one element.
int64_t reduce_scatter_segment_count(const ReduceScatterPhase& phase, int ranks,
                                     std::size_t element_size);

// The reduce-scatter phase described above. Failures name phase.algorithm,
// "reduce-scatter", the segment as the step, the rank and the peer.
[[nodiscard]] Status direct_reduce_scatter_phase(const void* input, void* owned_output,
                                                 const std::vector<Range>& blocks,
                                                 std::size_t element_size,
                                                 const ops::ReduceFn& reduce, Transport& transport,
                                                 const ReduceScatterPhase& phase,
                                                 const SegmentFn& finish_owned = {});

}  // namespace herd::collectives::detail
