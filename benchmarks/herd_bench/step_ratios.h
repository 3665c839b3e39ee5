// The comparisons of herd-bench's step table, as pure functions tested
// without MPI (tests/unit/bench): which baseline row the others are measured
// against (the fastest raw library row of the run), the floor row, and each
// row's ratios to them.
//
// Called by herd-bench's main thread on rank 0 (step_table.cc), and by the
// unit tests; no shared state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/herd_bench/step_plan.h"

namespace herd::bench {

// One path's outcome, on rank 0.
struct StepPathResult {
  std::string path;
  StepStats stats;        // of the slowest rank's step times
  int64_t wrong = 0;      // over all ranks
  bool baseline = false;  // a raw path (MPI, NCCL) the others are compared with
  // The memory-traffic floor: every rank copies its gradients at once. Not a
  // reduction, so it has no check (wrong stays 0) and is no baseline.
  bool floor = false;
};

// The index of the baseline row with the smallest median (the first of
// equal ones); none when no row is a baseline.
std::optional<std::size_t> best_baseline_row(const std::vector<StepPathResult>& results);

// The index of the first floor row; none when there is none.
std::optional<std::size_t> floor_row(const std::vector<StepPathResult>& results);

// One row against the run's best baseline and floor.
struct StepRatios {
  std::optional<double> speedup;          // best baseline's median / the row's median
  std::optional<double> over_baseline_s;  // the row's median - best baseline's median
  std::optional<double> over_floor;       // the row's median / the floor's median
};

// Row `row`'s ratios, each none where its reference row is missing or a
// median is not positive. Throws std::out_of_range for a row past the end.
StepRatios step_ratios(const std::vector<StepPathResult>& results, std::size_t row);

}  // namespace herd::bench
