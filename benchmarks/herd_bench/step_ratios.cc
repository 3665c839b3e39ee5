#include "benchmarks/herd_bench/step_ratios.h"

#include <stdexcept>

namespace herd::bench {

std::optional<std::size_t> best_baseline_row(const std::vector<StepPathResult>& results) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].baseline) continue;
    if (!best || results[i].stats.median_seconds < results[*best].stats.median_seconds) best = i;
  }
  return best;
}

std::optional<std::size_t> floor_row(const std::vector<StepPathResult>& results) {
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].floor) return i;
  }
  return std::nullopt;
}

StepRatios step_ratios(const std::vector<StepPathResult>& results, std::size_t row) {
  if (row >= results.size()) {
    throw std::out_of_range("step_ratios: row " + std::to_string(row) + " of " +
                            std::to_string(results.size()));
  }
  const double median = results[row].stats.median_seconds;
  StepRatios ratios;
  if (const std::optional<std::size_t> best = best_baseline_row(results)) {
    const double best_median = results[*best].stats.median_seconds;
    ratios.over_baseline_s = median - best_median;
    if (median > 0 && best_median > 0) ratios.speedup = best_median / median;
  }
  if (const std::optional<std::size_t> floor = floor_row(results)) {
    const double floor_median = results[*floor].stats.median_seconds;
    if (median > 0 && floor_median > 0) ratios.over_floor = median / floor_median;
  }
  return ratios;
}

}  // namespace herd::bench
