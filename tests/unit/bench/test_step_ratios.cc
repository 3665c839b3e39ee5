// step_ratios: the best baseline row, the floor row and each row's ratios to
// them, on step times chosen so that every expected value is exact.
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "benchmarks/herd_bench/step_ratios.h"

namespace herd::bench {
namespace {

StepPathResult row(const std::string& path, double median_seconds, bool baseline = false,
                   bool floor = false) {
  StepPathResult result;
  result.path = path;
  result.stats.median_seconds = median_seconds;
  result.stats.mean_seconds = median_seconds;
  result.baseline = baseline;
  result.floor = floor;
  return result;
}

// The CPU step's rows: medians in seconds, powers of two so that every ratio
// is exact in binary.
std::vector<StepPathResult> cpu_rows() {
  return {row("herd", 0.25),
          row("herd-inplace", 0.125),
          row("herd-nofusion", 0.5),
          row("mpi-fused", 2.0, true),
          row("mpi-per-tensor", 1.0, true),
          row("mpi-per-tensor-inplace", 0.5, true),
          row("floor", 0.0625, false, true)};
}

TEST_CASE("best_baseline_row picks the baseline with the smallest median") {
  std::vector<StepPathResult> rows = cpu_rows();
  CHECK(best_baseline_row(rows) == std::optional<std::size_t>(5));  // mpi-per-tensor-inplace
  // herd-inplace and the floor are faster, but neither is a baseline.
  rows[5].stats.median_seconds = 4.0;
  CHECK(best_baseline_row(rows) == std::optional<std::size_t>(4));  // mpi-per-tensor
  rows[3].stats.median_seconds = 1.0;                               // a tie: the first wins
  CHECK(best_baseline_row(rows) == std::optional<std::size_t>(3));
  CHECK(best_baseline_row({row("herd", 1.0), row("floor", 1.0, false, true)}) == std::nullopt);
  CHECK(best_baseline_row({}) == std::nullopt);
}

TEST_CASE("floor_row finds the floor") {
  CHECK(floor_row(cpu_rows()) == std::optional<std::size_t>(6));
  CHECK(floor_row({row("herd", 1.0), row("mpi", 2.0, true)}) == std::nullopt);
}

TEST_CASE("step_ratios compares a row with the best baseline and the floor") {
  const std::vector<StepPathResult> rows = cpu_rows();
  const StepRatios herd = step_ratios(rows, 0);
  REQUIRE(herd.speedup);
  CHECK(*herd.speedup == 2.0);  // 0.5 / 0.25
  REQUIRE(herd.over_baseline_s);
  CHECK(*herd.over_baseline_s == -0.25);  // 0.25 - 0.5
  REQUIRE(herd.over_floor);
  CHECK(*herd.over_floor == 4.0);  // 0.25 / 0.0625

  const StepRatios in_place = step_ratios(rows, 1);
  CHECK(*in_place.speedup == 4.0);
  CHECK(*in_place.over_floor == 2.0);

  const StepRatios best = step_ratios(rows, 5);
  CHECK(*best.speedup == 1.0);
  CHECK(*best.over_baseline_s == 0.0);
  CHECK(*best.over_floor == 8.0);

  const StepRatios slower = step_ratios(rows, 3);  // mpi-fused
  CHECK(*slower.speedup == 0.25);
  CHECK(*slower.over_baseline_s == 1.5);

  const StepRatios floor = step_ratios(rows, 6);
  CHECK(*floor.speedup == 8.0);
  CHECK(*floor.over_floor == 1.0);
}

TEST_CASE("step_ratios leaves out a ratio without its reference row") {
  const std::vector<StepPathResult> no_floor{row("herd", 0.25), row("nccl", 0.5, true)};
  const StepRatios herd = step_ratios(no_floor, 0);
  CHECK(*herd.speedup == 2.0);
  CHECK_FALSE(herd.over_floor);

  const std::vector<StepPathResult> no_baseline{row("herd", 0.25),
                                                row("floor", 0.125, false, true)};
  const StepRatios alone = step_ratios(no_baseline, 0);
  CHECK_FALSE(alone.speedup);
  CHECK_FALSE(alone.over_baseline_s);
  CHECK(*alone.over_floor == 2.0);

  // A zero median (a step too short for the clock) gives no ratio.
  const std::vector<StepPathResult> zero{row("herd", 0.0), row("mpi", 0.5, true),
                                         row("floor", 0.0, false, true)};
  CHECK_FALSE(step_ratios(zero, 0).speedup);
  CHECK_FALSE(step_ratios(zero, 0).over_floor);
  CHECK(*step_ratios(zero, 0).over_baseline_s == -0.5);
  CHECK_FALSE(step_ratios(zero, 1).over_floor);

  CHECK_THROWS_AS(step_ratios(zero, 3), std::out_of_range);
}

}  // namespace
}  // namespace herd::bench
