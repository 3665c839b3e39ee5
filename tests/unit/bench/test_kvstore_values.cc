// kvstore_values: the values each row of herd-bench kvstore must pull, and
// the checks that count the elements that differ, on hand-made gradients.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "benchmarks/herd_bench/kvstore_values.h"
#include "benchmarks/herd_bench/step_plan.h"

namespace herd::bench {
namespace {

std::vector<float> rank_values(int index, int rank, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  fill_step_input(index, rank, v.data(), count);
  return v;
}

TEST_CASE("kvstore check: the thresholds whose codes are all the same") {
  CHECK(check_compression_threshold("none", 7.0).empty());
  CHECK(check_compression_threshold("2bit", 0.5).empty());
  CHECK(check_compression_threshold("2bit", 1.0).empty());
  CHECK_FALSE(check_compression_threshold("2bit", 1.5).empty());
  CHECK_FALSE(check_compression_threshold("2bit", 0.0).empty());
  CHECK(check_compression_threshold("1bit", 0.0).empty());
  CHECK(check_compression_threshold("1bit", -3.0).empty());
  CHECK_FALSE(check_compression_threshold("1bit", 1.0).empty());
}

TEST_CASE("kvstore check: a compressed step pulls the threshold per push") {
  CHECK(compressed_step_value("2bit", 0.5, 1) == 0.5f);
  CHECK(compressed_step_value("2bit", 0.5, 4) == 2.0f);
  CHECK(compressed_step_value("2bit", 0.1, 3) == (0.1f + 0.1f) + 0.1f);
  CHECK(compressed_step_value("1bit", 0.0, 3) == 3.0f);
  CHECK(compressed_step_value("1bit", 0.25, 1) == 1.0f);
}

TEST_CASE("kvstore check: constant values") {
  std::vector<float> v(10, 1.5f);
  int64_t first = -1;
  CHECK(count_wrong_constant(v.data(), 10, 1.5f, &first) == 0);
  CHECK(first == -1);
  v[3] = 2.0f;
  v[7] = std::nanf("");
  CHECK(count_wrong_constant(v.data(), 10, 1.5f, &first) == 2);
  CHECK(first == 3);
}

TEST_CASE("kvstore check: one rank's push") {
  auto v = rank_values(5, 0, 20);
  int64_t first = -1;
  CHECK(count_wrong_rank_values(v.data(), 20, 5, 0, &first) == 0);
  CHECK(first == -1);
  // Another rank's values, another gradient's, a NaN.
  const auto rank1 = rank_values(5, 1, 20);
  CHECK(count_wrong_rank_values(rank1.data(), 20, 5, 0, &first) == 20);
  CHECK(first == 0);
  const auto other_gradient = rank_values(6, 0, 20);
  CHECK(count_wrong_rank_values(other_gradient.data(), 20, 5, 0, &first) == 20);
  v[13] = std::nanf("");
  CHECK(count_wrong_rank_values(v.data(), 20, 5, 0, &first) == 1);
  CHECK(first == 13);
}

TEST_CASE("kvstore check: the servers' updates, one per slice") {
  // Two small keys (one slice each) and one at the bound (a slice per server).
  const std::vector<int64_t> counts = {10, 999, 1000};
  CHECK(expected_server_updates(counts, 2, 3, 1000, 4) == (1 + 1 + 3) * 2 * 4);
  CHECK(expected_server_updates(counts, 1, 1, 1000, 1) == 3);
  CHECK(expected_server_updates(counts, 4, 2, 10, 2) == 6 * 4 * 2);
}

}  // namespace
}  // namespace herd::bench
