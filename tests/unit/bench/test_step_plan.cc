// step_plan: backward order, offsets, the split of the backward time, the
// tagged values and their closed-form sums (against sums done here), the
// check, and the median and mean of the steps.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "benchmarks/herd_bench/step_plan.h"

namespace herd::bench {
namespace {

std::vector<ParameterTensor> three_parameters() {
  return {{"a", {2, 3}}, {"b", {4}}, {"c", {10}}};  // 6, 4 and 10 elements
}

TEST_CASE("plan_step lists the gradients in backward order") {
  const std::vector<StepTensor> plan = plan_step(three_parameters(), 2.0);
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].name == "c");
  CHECK(plan[1].name == "b");
  CHECK(plan[2].name == "a");
  CHECK(plan[0].index == 2);
  CHECK(plan[2].index == 0);
  CHECK(plan[2].shape == std::vector<int64_t>{2, 3});
  // Arena offsets follow registration order, pack offsets backward order.
  CHECK(plan[2].offset == 0);
  CHECK(plan[1].offset == 6);
  CHECK(plan[0].offset == 10);
  CHECK(plan[0].packed_offset == 0);
  CHECK(plan[1].packed_offset == 10);
  CHECK(plan[2].packed_offset == 14);
}

TEST_CASE("plan_step splits the backward time in proportion to size") {
  const std::vector<StepTensor> plan = plan_step(three_parameters(), 2.0);
  CHECK(plan[0].gap_seconds == Approx(1.0));  // 10 of 20 elements
  CHECK(plan[1].gap_seconds == Approx(0.4));
  CHECK(plan[2].gap_seconds == Approx(0.6));
  for (const StepTensor& t : plan_step(three_parameters(), 0.0)) CHECK(t.gap_seconds == 0.0);

  double sum = 0;
  for (const StepTensor& t : plan_step(bert_base_parameters(), 0.25)) sum += t.gap_seconds;
  CHECK(sum == Approx(0.25));
}

TEST_CASE("the expected value is the sum of every rank's input") {
  for (int ranks : {1, 2, 3, 4, 8}) {
    for (int index : {0, 1, 160, 198}) {
      for (int64_t i : {0, 1, 7, 8, 13, 1000003}) {
        double sum = 0;
        for (int rank = 0; rank < ranks; ++rank) sum += step_input_value(index, rank, i);
        CHECK(step_expected_value(index, ranks, i) == sum);
      }
    }
  }
}

TEST_CASE("no two gradients share an expected value") {
  for (int ranks : {1, 2, 4, 7}) {
    double previous_max = -1;
    for (int index = 0; index < 5; ++index) {
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      for (int64_t i = 0; i < 8; ++i) {
        lo = std::min(lo, step_expected_value(index, ranks, i));
        hi = std::max(hi, step_expected_value(index, ranks, i));
      }
      CHECK(lo > previous_max);
      previous_max = hi;
    }
  }
}

TEST_CASE("count_wrong_step finds a wrong element, a NaN and another gradient's values") {
  const int ranks = 3;
  std::vector<float> data(20);
  for (int64_t i = 0; i < 20; ++i) data[i] = static_cast<float>(step_expected_value(5, ranks, i));
  int64_t first = -1;
  CHECK(count_wrong_step(data.data(), 20, 5, ranks, &first) == 0);
  CHECK(first == -1);

  data[11] += 1;
  data[17] = std::nanf("");
  CHECK(count_wrong_step(data.data(), 20, 5, ranks, &first) == 2);
  CHECK(first == 11);
  // The right values under another gradient's index are all wrong.
  CHECK(count_wrong_step(data.data(), 20, 4, ranks, &first) == 20);
  CHECK(first == 0);

  std::vector<float> input(20);
  fill_step_input(5, 2, input.data(), 20);
  CHECK(input[9] == step_input_value(5, 2, 9));
}

TEST_CASE("summarize_steps takes the median and the mean") {
  const StepStats odd = summarize_steps({3.0, 1.0, 2.0, 10.0, 4.0});
  CHECK(odd.median_seconds == 3.0);
  CHECK(odd.mean_seconds == Approx(4.0));
  const StepStats even = summarize_steps({4.0, 1.0, 2.0, 3.0});
  CHECK(even.median_seconds == 2.5);
  CHECK(even.mean_seconds == Approx(2.5));
  CHECK(summarize_steps({7.0}).median_seconds == 7.0);
  CHECK_THROWS_AS(summarize_steps({}), std::invalid_argument);
}

}  // namespace
}  // namespace herd::bench
