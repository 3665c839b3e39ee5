// Checked size arithmetic of shapes (the value types of include/herd/types.h).
//
// Shapes come from callers (the C++ API, the Python package, herd::Tensor),
// so their element counts and byte sizes are computed with overflow checks
// before anything trusts them; a shape that fails here is refused at
// submission, naming the tensor and the shape, instead of wrapping around
// into a small count (or a crash) later.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "herd/types.h"

namespace herd::detail {

// The number of elements of `shape` and their size in bytes as `dtype`.
struct ShapeSize {
  int64_t elements = 0;
  int64_t bytes = 0;
};

// The size of `shape` in `dtype`, or an error opening with `what` ("allreduce
// 'x': input") and naming the shape when an extent is negative, or when the
// product of its non-zero extents, or that product times the element size,
// exceeds 2^63-1: then neither the whole count nor the count of any part of
// the shape (a row, a slice) can overflow int64.
[[nodiscard]] Status checked_shape_size(std::string_view what, const std::vector<int64_t>& shape,
                                        DataType dtype, ShapeSize* size);

}  // namespace herd::detail
