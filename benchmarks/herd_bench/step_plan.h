// The plan of one training step for herd-bench's step benchmark, as pure
// functions tested without MPI (tests/unit/bench): the order in which the
// gradients are submitted, where each one lives in the buffers, the backward
// compute standing before each, the values every rank contributes and their
// sums, and the statistics of the timed steps.
//
// Called by herd-bench's main thread on every rank, and by the unit tests; no
// shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "benchmarks/herd_bench/model_shapes.h"

namespace herd::bench {

// One gradient of the step.
struct StepTensor {
  std::string name;  // the parameter's name, e.g. "fc.weight"
  std::vector<int64_t> shape;
  int index = 0;      // registration index: 0 for the model's first parameter
  int64_t count = 0;  // elements
  // First element in the input and output arenas, which hold every gradient
  // back to back in registration order, as a model's parameters often lie.
  int64_t offset = 0;
  // First element in mpi-fused's pack buffer, which holds them back to back
  // in the order of the step (backward order).
  int64_t packed_offset = 0;
  // The backward compute before this gradient is produced, in seconds.
  double gap_seconds = 0;
};

// The step: every parameter's gradient in backward order (the reverse of
// registration order: the last layer's gradient is produced first), with
// `backward_seconds` split across the gradients in proportion to their
// element counts (the gaps add up to backward_seconds; all 0 when it is 0).
std::vector<StepTensor> plan_step(const std::vector<ParameterTensor>& parameters,
                                  double backward_seconds);

// The check's values. Element i of gradient `index` on `rank` is
//   input_value(kSum, rank, i) + kStepTagStride * index
// (bench_values.h: i % 8 + rank + 1), so the sum over p ranks is
//   expected_value(kSum, p, i) + p * kStepTagStride * index,
// which lies in [8·index·p + p(p+1)/2, 8·index·p + 7p + p(p+1)/2]: no two
// gradients share a value, so a gradient written to another's place is
// caught even where the two have the same size. All partial sums are
// integers below 2^24 for any rank count up to thousands, hence exact in
// float32 whatever order the ranks add them in.
constexpr int64_t kStepTagStride = 8;
float step_input_value(int index, int rank, int64_t i);
double step_expected_value(int index, int ranks, int64_t i);

// Fills `count` elements of gradient `index` with `rank`'s values.
void fill_step_input(int index, int rank, float* data, int64_t count);

// Counts the elements of gradient `index` that differ from the sum over
// `ranks`; *first_wrong receives the index of the first (unchanged if none).
int64_t count_wrong_step(const float* data, int64_t count, int index, int ranks,
                         int64_t* first_wrong);

// The median and mean of the timed steps (each already the slowest rank's).
struct StepStats {
  double median_seconds = 0;
  double mean_seconds = 0;
};
// Throws std::invalid_argument when `seconds` is empty. An even count takes
// the mean of the two middle values as its median.
StepStats summarize_steps(std::vector<double> seconds);

}  // namespace herd::bench
