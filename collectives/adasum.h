// Adasum allreduce over a Transport: every rank ends with the same combination
// of the ranks' vectors, made by the Adasum rule instead of a sum.
//
// Two vectors a and b combine as
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a coefficient stays 1 when its vector's squared norm is below sqrt of
// the smallest normal double, so a zero vector leaves the other unchanged):
// orthogonal vectors add, equal vectors average. Over p = 2^k ranks the
// vectors combine as a binary tree in rank order:
//   adasum(adasum(v0, v1), adasum(v2, v3)) on 4 ranks, and so on.
//
// Algorithm (vector halving, distance doubling, as in Horovod's Adasum):
// at level L = 1, 2, 4, ..., p/2, rank r pairs with r XOR L. Each holds a
// segment of the buffer; the lower rank of the pair keeps the segment's first
// half (floor of half the elements), the upper one the rest, and each sends
// the other the half it gives up. Now the 2L ranks of the aligned block that
// contains r each hold one piece of the two vectors that meet at this level
// (the lower L ranks' combination and the upper L ranks'), so the dot product
// and both squared norms are partial sums, added up over those 2L ranks by a
// recursive-doubling allreduce of doubles; every rank then combines its
// piece. After log2(p) levels each rank holds 1/p of the result, and the
// reverse exchanges (distance halving) give every rank all of it. Each rank
// sends and receives 2 (p - 1) / p of the buffer, plus 3 doubles per tensor
// and level.
//
// Several tensors may share one buffer (a fused group): each gets its own dot
// product and norms, so the result is the same as reducing each alone. The
// ranks must agree on the tensors' element counts, which must sum to at most
// 2^62 elements. Every element of the result is computed on one rank and
// copied to the others, so every rank ends with the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/transport.h"
#include "common/status.h"
#include "herd/types.h"

namespace herd::collectives {

// True when `ranks` is a power of two (1 included): the rank counts Adasum runs on.
bool adasum_supports_ranks(int ranks);

// Reduces `buf` in place across every rank of the transport. `counts` lists the
// tensors laid back to back in `buf`, in elements of `dtype` (float16, float32
// or float64). On a rank count that is not a power of two nothing is sent and
// every rank returns a not-implemented Status naming the count; a failed
// transfer returns its Status with the level, peer and rank in the message.
[[nodiscard]] Status adasum_allreduce(void* buf, const std::vector<int64_t>& counts, DataType dtype,
                                      Transport& transport);

}  // namespace herd::collectives
