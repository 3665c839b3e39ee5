// Definitions for the value types declared in include/herd/types.h.
#include "herd/types.h"

#include <fmt/format.h>

#include "common/enforce.h"
#include "common/types.h"
#include "herd/error.h"

namespace herd {

std::size_t element_size(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8: return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
  }
  HERD_ENFORCE(false && "unknown DataType");
}

std::string to_string(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
  }
  return fmt::format("DataType({})", static_cast<int>(dtype));
}

std::string to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kAdasum: return "adasum";
  }
  return fmt::format("ReduceOp({})", static_cast<int>(op));
}

std::string to_string(const Device& device) {
  return device.type == DeviceType::kCPU ? std::string("cpu") : fmt::format("gpu:{}", device.index);
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

namespace {

detail::ShapeSize checked_view_size(const TensorView& view) {
  detail::ShapeSize size;
  const Status status =
      detail::checked_shape_size("herd::TensorView:", view.shape, view.dtype, &size);
  if (!status.is_ok()) throw Error(status.message());
  return size;
}

}  // namespace

int64_t TensorView::num_elements() const { return checked_view_size(*this).elements; }

std::size_t TensorView::num_bytes() const {
  return static_cast<std::size_t>(checked_view_size(*this).bytes);
}

namespace detail {

Status checked_shape_size(std::string_view what, const std::vector<int64_t>& shape, DataType dtype,
                          ShapeSize* size) {
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (std::size_t dim = 0; dim < shape.size(); ++dim) {
    const int64_t extent = shape[dim];
    if (extent < 0) {
      return Status::error(fmt::format("{} shape {} has a negative extent ({} in dimension {})",
                                       what, shape_to_string(shape), extent, dim));
    }
    if (extent == 0) {
      has_zero = true;
    } else if (__builtin_mul_overflow(nonzero_product, extent, &nonzero_product)) {
      return Status::error(fmt::format(
          "{} shape {} has more elements than 2^63-1 (the product of its extents overflows int64)",
          what, shape_to_string(shape)));
    }
  }
  const auto element_bytes = static_cast<int64_t>(element_size(dtype));
  int64_t nonzero_bytes = 0;
  if (__builtin_mul_overflow(nonzero_product, element_bytes, &nonzero_bytes)) {
    return Status::error(
        fmt::format("{} shape {} of {} ({} elements of {} bytes) is larger than 2^63-1 bytes", what,
                    shape_to_string(shape), to_string(dtype), nonzero_product, element_bytes));
  }
  size->elements = has_zero ? 0 : nonzero_product;
  size->bytes = has_zero ? 0 : nonzero_bytes;
  return Status::ok();
}

}  // namespace detail
}  // namespace herd
