// Checks of one submission that need nothing but its arguments: run on the
// submitting application thread, before anything is queued, so a malformed
// request throws at once on the rank that made it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "herd/error.h"
#include "herd/types.h"

namespace herd::detail {

// The exception of a call that is wrong by itself on this rank.
inline Error invalid_argument(const std::string& message) {
  return Error(message, ErrorKind::kInvalidArgument);
}

// Checks one view on its own: no negative extent, data present when there are
// elements, CPU memory. `what` opens the message ("allgather 'x'"), `role`
// names the view ("input").
[[nodiscard]] Status validate_view(const std::string& what, const char* role,
                                   const TensorView& view);

// Checks one allreduce submission: a name, matching dtype and element count
// of input and output, both views valid, input and output either the same
// buffer or disjoint, finite scales. `what` opens the message.
[[nodiscard]] Status validate_reduction(const std::string& what, const TensorView& input,
                                        const TensorView& output, double prescale,
                                        double postscale);

// alltoall's splits against the input's first dimension and the number of
// ranks; an empty `splits` becomes the even split. The message names the
// tensor and the values.
[[nodiscard]] Status resolve_alltoall_splits(const std::string& name, const TensorView& input,
                                             int ranks, std::vector<int64_t>* splits);

}  // namespace herd::detail
