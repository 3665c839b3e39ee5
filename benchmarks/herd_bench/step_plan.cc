#include "benchmarks/herd_bench/step_plan.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "benchmarks/herd_bench/bench_values.h"

namespace herd::bench {

std::vector<StepTensor> plan_step(const std::vector<ParameterTensor>& parameters,
                                  double backward_seconds) {
  const int64_t total = total_elements(parameters);
  std::vector<StepTensor> step(parameters.size());
  int64_t offset = 0;
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    // Registration order k lands at backward position size-1-k.
    StepTensor& tensor = step[parameters.size() - 1 - k];
    tensor.name = parameters[k].name;
    tensor.shape = parameters[k].shape;
    tensor.index = static_cast<int>(k);
    tensor.count = parameters[k].num_elements();
    tensor.offset = offset;
    tensor.gap_seconds =
        total > 0 ? backward_seconds * static_cast<double>(tensor.count) / total : 0.0;
    offset += tensor.count;
  }
  int64_t packed = 0;
  for (StepTensor& tensor : step) {
    tensor.packed_offset = packed;
    packed += tensor.count;
  }
  return step;
}

float step_input_value(int index, int rank, int64_t i) {
  return static_cast<float>(input_value(ReduceOp::kSum, rank, i) + kStepTagStride * index);
}

double step_expected_value(int index, int ranks, int64_t i) {
  return expected_value(ReduceOp::kSum, ranks, i) +
         static_cast<double>(ranks) * kStepTagStride * index;
}

void fill_step_input(int index, int rank, float* data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) data[i] = step_input_value(index, rank, i);
}

int64_t count_wrong_step(const float* data, int64_t count, int index, int ranks,
                         int64_t* first_wrong) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    // Exact comparison: every value is an integer float32 holds exactly. A
    // NaN (the poison) compares unequal and counts as wrong.
    if (static_cast<double>(data[i]) == step_expected_value(index, ranks, i)) continue;
    if (wrong == 0) *first_wrong = i;
    ++wrong;
  }
  return wrong;
}

StepStats summarize_steps(std::vector<double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("summarize_steps: no steps");
  StepStats stats;
  stats.mean_seconds =
      std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
  std::sort(seconds.begin(), seconds.end());
  const std::size_t middle = seconds.size() / 2;
  stats.median_seconds =
      seconds.size() % 2 == 1 ? seconds[middle] : (seconds[middle - 1] + seconds[middle]) / 2;
  return stats;
}

}  // namespace herd::bench
