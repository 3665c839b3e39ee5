// Definitions for herd::Tensor (include/herd/tensor.h).
#include "herd/tensor.h"

#include <fmt/format.h>

#include "common/device_memory.h"
#include "common/types.h"
#include "herd/error.h"

namespace herd {

void Tensor::reset(DataType dtype, std::vector<int64_t> shape, Device device) {
  for (std::size_t dim = 0; dim < shape.size(); ++dim) {
    if (shape[dim] < 0) {
      throw Error(
          fmt::format("herd::Tensor: dimension {} of shape {} is {}; extents must not be "
                      "negative",
                      dim, shape_to_string(shape), shape[dim]));
    }
  }
  detail::ShapeSize size;
  const Status checked = detail::checked_shape_size("herd::Tensor:", shape, dtype, &size);
  if (!checked.is_ok()) throw Error(checked.message());
  // Free the old buffer first: a large GPU tensor reset to a new shape must
  // not need room for both.
  storage_.reset();
  // Until the allocation has succeeded the tensor is empty (no elements, no
  // data), so a failed reset leaves nothing that claims memory it lacks.
  shape_ = {0};
  // Always own a buffer, even for zero elements, so data() is never null.
  storage_ = detail::allocate(device, static_cast<std::size_t>(size.bytes));
  dtype_ = dtype;
  shape_ = std::move(shape);
  device_ = device;
}

// reset() checked the shape, so the product fits.
int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t extent : shape_) n *= extent;
  return n;
}

}  // namespace herd
