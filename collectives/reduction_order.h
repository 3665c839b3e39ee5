// The order in which every CPU allreduce and reducescatter algorithm
// combines the ranks' values of one element, and a fold that computes it.
//
// Why one order: floating-point reduction is not associative, so the bits
// of a result depend on how the p values were grouped. If that grouping
// depended on where an element lies in a buffer (a ring chunk, a shared
// memory share), on how tensors were fused, or on which algorithm the fused
// size selects, the same inputs would give different results from run to
// run. Every algorithm therefore computes every element as the same
// expression of x_0 .. x_{p-1} (x_j: rank j's value, `a op b`:
// reduce(dst, a, b)):
//
//   p2 = the largest power of two <= p, extra = p - p2;
//   leaves l_0 .. l_{p2-1}: l_v = x_{2v} op x_{2v+1} for v < extra,
//                           l_v = x_{v+extra} otherwise;
//   then a balanced binary tree over the leaves in order: each level
//   combines neighbours l_{2i} op l_{2i+1} until one value remains.
//
// This is the tree recursive doubling computes (allreduce.cc: the fold-in
// pairs are the leaves, exchange step k combines blocks of 2^k leaves, the
// lower one on the left), so the latency-optimal algorithm keeps its log2(p)
// exchanges; an algorithm that has all p values of an element at one rank
// (the direct reduce-scatter, the shared-memory owner of a share) folds them
// in this order with the same p - 1 reductions a chain would take.
// docs/design/reduction-order.md argues the choice.
//
// Internal to collectives/ (namespace detail); safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/reduce.h"

namespace herd::collectives::detail {

// Writes the reduction of sources[0..ranks) in the order above to dst, for
// `count` elements of element_size bytes: sources[j] holds rank j's values.
// dst may be one of the sources (it is written only by the last reduction,
// which reads operands at the same element) but must not otherwise overlap
// them. With one rank, copies sources[0] to dst; with two, one reduction.
// Intermediate values live in a per-thread scratch of at most
// (log2(ranks) + 1) * kFoldBlockBytes.
void fold_in_reduction_order(void* dst, const void* const* sources, int ranks, int64_t count,
                             std::size_t element_size, const ops::ReduceFn& reduce);

// From 3 ranks on, the fold runs over blocks of at most this many bytes, so
// that a block's intermediate values stay in the L1 cache between the
// reductions: 8 KiB blocks folded as fast as a chain of reductions over the
// whole buffer from 3 to 8 ranks, 64 KiB blocks up to 14 % slower
// (docs/design/reduction-order.md).
constexpr std::size_t kFoldBlockBytes = 8 * 1024;

}  // namespace herd::collectives::detail
