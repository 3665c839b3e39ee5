// The reduction order of collectives/reduction_order.h computed
// independently, level by level over an array, and float inputs whose sums
// change with the order of the additions; shared by the collectives tests.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace herd::collectives::testing {

// The reduction order's result for values(0) .. values(p - 1): pairs (2v,
// 2v + 1) combined first for v < p - p2 (p2 the largest power of two <= p),
// then neighbours combined level by level, lower index on the left.
template <typename T>
T reduction_order_reference(int p, const std::function<T(int rank)>& values,
                            const std::function<T(T, T)>& combine) {
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int extra = p - p2;
  std::vector<T> level;
  for (int v = 0; v < p2; ++v) {
    level.push_back(v < extra ? combine(values(2 * v), values(2 * v + 1)) : values(v + extra));
  }
  while (level.size() > 1) {
    std::vector<T> next;
    for (std::size_t i = 0; i + 1 < level.size(); i += 2) {
      next.push_back(combine(level[i], level[i + 1]));
    }
    level = next;
  }
  return level.front();
}

inline float add_floats(float a, float b) { return a + b; }

// Rank `rank`'s value at index i: magnitudes from 1e8 down to 0.25, so that
// a float sum rounds differently when the order of its terms changes (1e8 +
// 1 - 1e8 is 0, 1e8 - 1e8 + 1 is 1), picked by a hash of the rank and the
// index, so that every position of every chunk, share and segment sees such
// sums.
inline float order_sensitive_value(int rank, int64_t i) {
  static constexpr float kValues[] = {1e8f,    1.0f, -1e8f, 3.0f, 0.25f, -7.5f, 3e7f,
                                      -2.5e7f, 5.0f, -1.0f, 6e7f, 0.75f, -4e7f};
  constexpr uint64_t kCount = sizeof(kValues) / sizeof(kValues[0]);
  uint64_t h = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank);
  h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 29;
  return kValues[h % kCount];
}

// The reduction order's float sum of order_sensitive_value over p ranks at i.
inline float order_sensitive_sum(int p, int64_t i) {
  return reduction_order_reference<float>(
      p, [i](int rank) { return order_sensitive_value(rank, i); }, add_floats);
}

// The same values summed left to right starting at rank `first`: x_first +
// x_{first+1} + ... + x_{first-1}, ranks mod p, the order a ring or a share
// owner starting at its own rank would take. For p >= 3 every such order but
// the one the reduction order equals (first = 0 on 3 ranks) differs from
// order_sensitive_sum at some indices, which the tests check so that they
// can tell the orders apart.
inline float rotated_left_fold_sum(int p, int first, int64_t i) {
  float sum = order_sensitive_value(first, i);
  for (int k = 1; k < p; ++k) sum += order_sensitive_value((first + k) % p, i);
  return sum;
}

}  // namespace herd::collectives::testing
