// Fusion planning: which agreed responses share one fusion buffer.
//
// Every rank plans from the same ordered response list and so gets the same
// groups. Pure function, tested without MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/message.h"

namespace herd::detail {

struct FusionGroup {
  std::vector<std::size_t> members;  // indices into the planned responses, ascending
  std::size_t total_bytes = 0;
};

// Groups execute responses (errors are skipped: the caller fails them; every
// collective but a plain allreduce is a group of its own) so that
// members of a group have the same collective, dtype, op, prescale, postscale
// and device, and a group's total bytes stay within threshold_bytes. A
// response larger than the threshold, or than max_tensor_bytes when that is
// positive, is a group of its own; threshold 0 gives one group per response. Responses join the
// open group of their kind, in order, so an unlike response in between does not break a group;
// groups are returned in the order of their first member.
std::vector<FusionGroup> plan_fusion(const std::vector<Response>& responses,
                                     int64_t threshold_bytes, int64_t max_tensor_bytes = 0);

}  // namespace herd::detail
