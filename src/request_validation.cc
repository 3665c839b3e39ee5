#include "src/request_validation.h"

#include <cmath>

#include <fmt/format.h>

#include "common/types.h"

namespace herd::detail {

Status resolve_alltoall_splits(const std::string& name, const TensorView& input, int ranks,
                               std::vector<int64_t>* splits) {
  const int64_t rows = input.shape.empty() ? 0 : input.shape[0];
  if (splits->empty()) {
    if (rows % ranks != 0) {
      return Status::error(fmt::format(
          "alltoall '{}': no splits given, and the first dimension {} does not divide evenly "
          "among {} ranks",
          name, rows, ranks));
    }
    splits->assign(static_cast<std::size_t>(ranks), rows / ranks);
    return Status::ok();
  }
  if (splits->size() != static_cast<std::size_t>(ranks)) {
    return Status::error(
        fmt::format("alltoall '{}': {} splits [{}] for {} ranks; give one per rank", name,
                    splits->size(), fmt::join(*splits, ","), ranks));
  }
  int64_t sum = 0;
  for (int64_t split : *splits) {
    if (split < 0) {
      return Status::error(fmt::format("alltoall '{}': splits [{}] hold a negative count", name,
                                       fmt::join(*splits, ",")));
    }
    if (__builtin_add_overflow(sum, split, &sum)) {
      // Wrapped around, the sum could equal the first dimension again.
      return Status::error(fmt::format("alltoall '{}': splits [{}] sum to more than 2^63-1", name,
                                       fmt::join(*splits, ",")));
    }
  }
  if (sum != rows) {
    return Status::error(
        fmt::format("alltoall '{}': splits [{}] sum to {}, but the first dimension is {}", name,
                    fmt::join(*splits, ","), sum, rows));
  }
  return Status::ok();
}

Status validate_view(const std::string& what, const char* role, const TensorView& view) {
  for (int64_t extent : view.shape) {
    if (extent < 0) {
      return Status::error(fmt::format("{}: {} shape {} has a negative extent", what, role,
                                       shape_to_string(view.shape)));
    }
  }
  ShapeSize size;
  HERD_RETURN_IF_ERROR(
      checked_shape_size(fmt::format("{}: {}", what, role), view.shape, view.dtype, &size));
  if (view.data == nullptr && size.elements > 0) {
    return Status::error(fmt::format("{}: {} data is null but shape {} has {} elements", what, role,
                                     shape_to_string(view.shape), size.elements));
  }
  return Status::ok();
}

Status validate_reduction(const std::string& what, const TensorView& input,
                          const TensorView& output, double prescale, double postscale) {
  HERD_RETURN_IF_ERROR(validate_view(what, "input", input));
  HERD_RETURN_IF_ERROR(validate_view(what, "output", output));
  if (input.device != output.device) {
    return Status::error(
        fmt::format("{}: input is on {} but output on {}; both must be on the "
                    "same device",
                    what, to_string(input.device), to_string(output.device)));
  }
  if (input.dtype != output.dtype) {
    return Status::error(fmt::format("{}: input dtype {} differs from output dtype {}", what,
                                     to_string(input.dtype), to_string(output.dtype)));
  }
  if (input.num_elements() != output.num_elements()) {
    return Status::error(
        fmt::format("{}: input shape {} ({} elements) differs from output shape {} ({} elements)",
                    what, shape_to_string(input.shape), input.num_elements(),
                    shape_to_string(output.shape), output.num_elements()));
  }
  if (input.data != output.data && input.num_bytes() > 0) {
    const auto* in = static_cast<const uint8_t*>(input.data);
    const auto* out = static_cast<const uint8_t*>(output.data);
    if (in < out + output.num_bytes() && out < in + input.num_bytes()) {
      return Status::error(
          fmt::format("{}: input and output overlap without being the same buffer", what));
    }
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale)) {
    return Status::error(
        fmt::format("{}: prescale {} and postscale {} must be finite", what, prescale, postscale));
  }
  return Status::ok();
}

}  // namespace herd::detail
