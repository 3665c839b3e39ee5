// What each row of herd-bench's kvstore benchmark must pull after a step, as
// pure functions tested without MPI (tests/unit/bench): every rank pushes
// step_plan.h's values (element i of gradient `index` on rank r is
// i % 8 + r + 1 + 8 * index, never below 1).
//
//   allreduce, horovod, dist_sync: the sum over the ranks (step_plan.h's
//     step_expected_value).
//   dist_async: a store needs an optimizer there (as upstream); the
//     benchmark's is SGD with learning rate 0, so each server applies every
//     push and the value stays rank 0's init value: rank 0's push.
//   dist_sync with 2-bit compression: every value reaches the threshold
//     t <= 1 at every push, so every code is +t and the store is assigned
//     ranks * t. 1-bit with t < 1: every bit is 1, so ranks * 1.
//     (dist_async with compression: as without, rank 0's values.)
//
// Called by herd-bench's main thread on every rank, and by the unit tests; no
// shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::bench {

// The thresholds for which the values above make every code the same:
// 0 < t <= 1 for "2bit", t < 1 for "1bit", anything for "none". Returns an
// empty string when `threshold` is one of them, else why not.
std::string check_compression_threshold(const std::string& type, double threshold);

// What every element of every gradient holds after a compressed dist_sync
// step: the value one push carries (t for "2bit", 1 for "1bit") summed over
// `pushes_summed` workers in float32.
float compressed_step_value(const std::string& type, double threshold, int pushes_summed);

// Elements of `data` that differ from `expected`; *first_wrong receives the
// index of the first (unchanged if none). NaN counts as wrong.
int64_t count_wrong_constant(const float* data, int64_t count, float expected,
                             int64_t* first_wrong);

// Elements of gradient `index` that differ from `rank`'s push of it.
int64_t count_wrong_rank_values(const float* data, int64_t count, int index, int rank,
                                int64_t* first_wrong);

// The pushes the servers apply when every one of `workers` pushes every key
// of `counts` (elements per key) `steps` times: one per slice, and a key of
// at least `bigarray_bound` elements has a slice on each of `servers`.
int64_t expected_server_updates(const std::vector<int64_t>& counts, int workers, int servers,
                                int64_t bigarray_bound, int steps);

}  // namespace herd::bench
