// What each row of herd-bench's kvstore benchmark must pull after a step, as
// pure functions tested without MPI (tests/unit/bench): every rank pushes
// step_plan.h's values (element i of gradient `index` on rank r is
// i % 8 + r + 1 + 8 * index, never below 1), and the store's default updater
// assigns.
//
//   allreduce, horovod, dist_sync: the sum over the ranks (step_plan.h's
//     step_expected_value).
//   dist_async: each server assigns each push as it arrives, so a pull
//     returns one rank's push, whole: some rank's values for every element of
//     a gradient (which rank may differ from gradient to gradient).
//   with 2-bit compression: every value reaches the threshold t <= 1 at every
//     push, so every code is +t and the store receives t per push: ranks * t
//     summed (dist_sync), t assigned (dist_async). 1-bit with t < 1: every
//     bit is 1, so 1 per push.
//
// Called by herd-bench's main thread on every rank, and by the unit tests; no
// shared state.
#pragma once

#include <cstdint>
#include <string>

namespace herd::bench {

// The thresholds for which the values above make every code the same:
// 0 < t <= 1 for "2bit", t < 1 for "1bit", anything for "none". Returns an
// empty string when `threshold` is one of them, else why not.
std::string check_compression_threshold(const std::string& type, double threshold);

// What every element of every gradient holds after a compressed step: the
// value one push carries (t for "2bit", 1 for "1bit") times `pushes_summed`
// (the number of workers for dist_sync, 1 for dist_async).
float compressed_step_value(const std::string& type, double threshold, int pushes_summed);

// Elements of `data` that differ from `expected`; *first_wrong receives the
// index of the first (unchanged if none). NaN counts as wrong.
int64_t count_wrong_constant(const float* data, int64_t count, float expected,
                             int64_t* first_wrong);

// Elements of gradient `index` that differ from the push of the rank whose
// value element 0 holds (all of them when element 0 is no rank's value).
int64_t count_wrong_one_rank(const float* data, int64_t count, int index, int ranks,
                             int64_t* first_wrong);

}  // namespace herd::bench
