#include "benchmarks/herd_bench/kvstore_values.h"

#include "benchmarks/herd_bench/step_plan.h"

namespace herd::bench {

std::string check_compression_threshold(const std::string& type, double threshold) {
  if (type == "2bit" && !(threshold > 0 && threshold <= 1)) {
    return "2bit needs a threshold in (0, 1] here (every pushed value is at least 1, so every "
           "code is +t and the pulled values are known)";
  }
  if (type == "1bit" && !(threshold < 1)) {
    return "1bit needs a threshold below 1 here (every pushed value is at least 1, so every bit "
           "is 1 and the pulled values are known)";
  }
  return "";
}

float compressed_step_value(const std::string& type, double threshold, int pushes_summed) {
  const float per_push = type == "1bit" ? 1.0f : static_cast<float>(threshold);
  // A sum of a few equal float32 values: the store adds them one at a time.
  float sum = 0.0f;
  for (int i = 0; i < pushes_summed; ++i) sum += per_push;
  return sum;
}

int64_t count_wrong_constant(const float* data, int64_t count, float expected,
                             int64_t* first_wrong) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (data[i] == expected) continue;
    if (wrong == 0) *first_wrong = i;
    ++wrong;
  }
  return wrong;
}

int64_t count_wrong_rank_values(const float* data, int64_t count, int index, int rank,
                                int64_t* first_wrong) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (data[i] == step_input_value(index, rank, i)) continue;
    if (wrong == 0) *first_wrong = i;
    ++wrong;
  }
  return wrong;
}

int64_t expected_server_updates(const std::vector<int64_t>& counts, int workers, int servers,
                                int64_t bigarray_bound, int steps) {
  int64_t slices = 0;
  for (int64_t n : counts) slices += n >= bigarray_bound ? servers : 1;
  return slices * workers * steps;
}

}  // namespace herd::bench
