// The reduction order's fold; see reduction_order.h.
#include "collectives/reduction_order.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "collectives/thread_scratch.h"
#include "common/enforce.h"

namespace herd::collectives::detail {
namespace {

// Enough stack positions for any int number of ranks: the leaves' tree has
// at most 31 levels, and the stack holds one value per level plus one.
constexpr int kMaxPositions = 33;

// This thread's scratch for intermediate values, at least `bytes` long
// (thread_scratch.h).
struct FoldScratchTag {};
unsigned char* fold_scratch(std::size_t bytes) { return thread_scratch<FoldScratchTag>(bytes); }

// One value on the evaluation stack: a source or an intermediate value, and
// the number of leaves' levels it spans (0: a leaf).
struct Value {
  const void* data;
  int level;
};

// The fold of `count` elements (at most one block): the leaves are pushed in
// order and two values of the same level are combined as soon as both are
// on the stack, lower one on the left, which evaluates the balanced tree
// bottom-up, left to right. A value at stack position s that is not a
// source lives in temp s; combining positions s and s + 1 writes temp s
// (reduce allows dst == a). The (ranks - 1)-th and last reduction writes dst.
void fold_block(unsigned char* dst, const unsigned char* const* sources, int ranks, int64_t count,
                std::size_t block_bytes, const ops::ReduceFn& reduce) {
  int p2 = 1;
  int positions = 1;  // the stack's deepest: one more than the tree's levels
  while (p2 <= ranks / 2) {
    p2 *= 2;
    ++positions;
  }
  const int extra = ranks - p2;
  unsigned char* temps = fold_scratch(block_bytes * static_cast<std::size_t>(positions));
  int reductions_left = ranks - 1;
  auto combine = [&](const void* a, const void* b, int position) -> const void* {
    void* out = --reductions_left == 0
                    ? static_cast<void*>(dst)
                    : static_cast<void*>(temps + static_cast<std::size_t>(position) * block_bytes);
    reduce(out, a, b, count);
    return out;
  };

  Value stack[kMaxPositions];
  int top = 0;  // values on the stack
  for (int leaf = 0; leaf < p2; ++leaf) {
    const void* value = leaf < extra ? combine(sources[2 * leaf], sources[2 * leaf + 1], top)
                                     : static_cast<const void*>(sources[leaf + extra]);
    stack[top++] = Value{value, 0};
    while (top >= 2 && stack[top - 1].level == stack[top - 2].level) {
      const Value combined{combine(stack[top - 2].data, stack[top - 1].data, top - 2),
                           stack[top - 2].level + 1};
      --top;
      stack[top - 1] = combined;
    }
  }
}

}  // namespace

void fold_in_reduction_order(void* dst, const void* const* sources, int ranks, int64_t count,
                             std::size_t element_size, const ops::ReduceFn& reduce) {
  HERD_ENFORCE_GE(ranks, 1);
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  if (count == 0) return;
  auto* out = static_cast<unsigned char*>(dst);
  if (ranks == 1) {
    if (dst != sources[0]) {
      std::memmove(dst, sources[0], static_cast<std::size_t>(count) * element_size);
    }
    return;
  }
  if (ranks == 2) {
    reduce(dst, sources[0], sources[1], count);
    return;
  }
  const int64_t block_count =
      std::max<int64_t>(1, static_cast<int64_t>(kFoldBlockBytes / element_size));
  const std::size_t block_bytes = static_cast<std::size_t>(block_count) * element_size;
  // Pointers to the current block of every source.
  thread_local std::unique_ptr<const unsigned char*[]> at;
  thread_local int at_capacity = 0;
  if (ranks > at_capacity) {
    at.reset(new const unsigned char*[static_cast<std::size_t>(ranks)]);
    at_capacity = ranks;
  }
  for (int64_t first = 0; first < count; first += block_count) {
    const int64_t n = std::min(block_count, count - first);
    const std::size_t offset = static_cast<std::size_t>(first) * element_size;
    for (int j = 0; j < ranks; ++j) {
      at[static_cast<std::size_t>(j)] = static_cast<const unsigned char*>(sources[j]) + offset;
    }
    fold_block(out + offset, at.get(), ranks, n, block_bytes, reduce);
  }
}

}  // namespace herd::collectives::detail
