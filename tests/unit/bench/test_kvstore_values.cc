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

TEST_CASE("kvstore check: one rank's push, whole") {
  for (int rank : {0, 1, 3}) {
    auto v = rank_values(5, rank, 20);
    int64_t first = -1;
    CHECK(count_wrong_one_rank(v.data(), 20, 5, 4, &first) == 0);
    // A mix of two ranks' values is wrong where it differs from element 0's.
    const auto other = rank_values(5, rank == 0 ? 2 : 0, 20);
    v[11] = other[11];
    CHECK(count_wrong_one_rank(v.data(), 20, 5, 4, &first) == 1);
    CHECK(first == 11);
  }
  // Another gradient's values, a rank beyond the job, or the sum: all wrong.
  const auto other_gradient = rank_values(6, 0, 20);
  int64_t first = -1;
  CHECK(count_wrong_one_rank(other_gradient.data(), 20, 5, 4, &first) == 20);
  CHECK(first == 0);
  const auto beyond = rank_values(5, 4, 20);
  CHECK(count_wrong_one_rank(beyond.data(), 20, 5, 4, &first) == 20);
  std::vector<float> sum(20);
  for (int64_t i = 0; i < 20; ++i)
    sum[static_cast<size_t>(i)] = static_cast<float>(step_expected_value(5, 2, i));
  CHECK(count_wrong_one_rank(sum.data(), 20, 5, 2, &first) == 20);
  std::vector<float> nan(20, std::nanf(""));
  CHECK(count_wrong_one_rank(nan.data(), 20, 5, 2, &first) == 20);
}

}  // namespace
}  // namespace herd::bench
