// Adasum computed the textbook way, in double: the pairwise rule, and the
// ranks' vectors combined as a binary tree in rank order. Independent of
// collectives/adasum.cc (no halving, no partial sums); shared by the
// collectives unit test and the MPI test of the public API.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace herd::collectives::testing {

// (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b; a coefficient stays 1 when its
// vector's squared norm is below sqrt of the smallest normal double.
inline std::vector<double> adasum_pair(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, a2 = 0, b2 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    a2 += a[i] * a[i];
    b2 += b[i] * b[i];
  }
  const double tiny = std::sqrt(std::numeric_limits<double>::min());
  const double ca = a2 >= tiny ? 1 - dot / (2 * a2) : 1;
  const double cb = b2 >= tiny ? 1 - dot / (2 * b2) : 1;
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// vectors[first .. first + n) combined as a binary tree (n a power of two):
// the first half's result with the second half's.
inline std::vector<double> adasum_tree(const std::vector<std::vector<double>>& vectors,
                                       std::size_t first, std::size_t n) {
  if (n == 1) return vectors[first];
  return adasum_pair(adasum_tree(vectors, first, n / 2),
                     adasum_tree(vectors, first + n / 2, n / 2));
}

// |actual - expected| / |expected| over the whole vectors (0 for two zeros).
inline double relative_error(const std::vector<double>& actual,
                             const std::vector<double>& expected) {
  double error2 = 0, norm2 = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    error2 += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    norm2 += expected[i] * expected[i];
  }
  return error2 == 0 ? 0 : std::sqrt(error2 / norm2);
}

}  // namespace herd::collectives::testing
