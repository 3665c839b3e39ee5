// herd::Tensor's shape checks: a negative extent throws herd::Error naming
// the dimension and its value, and leaves the tensor as it was; so does a
// shape whose element count or byte size overflows int64 (checked_shape_size,
// which TensorView's sizes use too).
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/types.h"
#include "herd/error.h"
#include "herd/tensor.h"

namespace herd {
namespace {

std::string error_of(DataType dtype, const std::vector<int64_t>& shape, Tensor* tensor) {
  try {
    tensor->reset(dtype, shape);
  } catch (const Error& error) {
    return error.what();
  }
  return "no herd::Error";
}

TEST_CASE("tensor: a negative extent throws herd::Error naming it", "[tensor]") {
  Tensor tensor;
  CHECK(error_of(DataType::kFloat32, {2, -3}, &tensor) ==
        "herd::Tensor: dimension 1 of shape [2,-3] is -3; extents must not be negative");
  CHECK(error_of(DataType::kInt8, {-1}, &tensor) ==
        "herd::Tensor: dimension 0 of shape [-1] is -1; extents must not be negative");
  CHECK_THROWS_AS(Tensor(DataType::kFloat64, {4, 0, -7}), Error);
}

TEST_CASE("tensor: a refused shape leaves the tensor unchanged", "[tensor]") {
  Tensor tensor(DataType::kInt32, {2, 3});
  int32_t* data = tensor.data_as<int32_t>();
  for (int i = 0; i < 6; ++i) data[i] = i * 10;
  CHECK(error_of(DataType::kFloat32, {5, -1, 2}, &tensor) ==
        "herd::Tensor: dimension 1 of shape [5,-1,2] is -1; extents must not be negative");
  CHECK(tensor.dtype() == DataType::kInt32);
  CHECK(tensor.shape() == std::vector<int64_t>{2, 3});
  REQUIRE(tensor.data_as<int32_t>() == data);
  for (int i = 0; i < 6; ++i) CHECK(tensor.data_as<int32_t>()[i] == i * 10);
}

TEST_CASE("tensor: a shape whose size overflows int64 throws and changes nothing", "[tensor]") {
  Tensor tensor(DataType::kInt32, {2, 3});
  const void* data = tensor.data();
  // 2^62+1 rows of 4: 2^64+4 elements, which wraps to 4.
  CHECK(error_of(DataType::kFloat32, {(int64_t{1} << 62) + 1, 4}, &tensor) ==
        "herd::Tensor: shape [4611686018427387905,4] has more elements than 2^63-1 (the "
        "product of its extents overflows int64)");
  CHECK(error_of(DataType::kUInt8, {int64_t{1} << 32, (int64_t{1} << 32) + 1}, &tensor) ==
        "herd::Tensor: shape [4294967296,4294967297] has more elements than 2^63-1 (the "
        "product of its extents overflows int64)");
  // 2^61 elements fit, 2^64 bytes of float64 do not.
  CHECK(error_of(DataType::kFloat64, {int64_t{1} << 60, 2}, &tensor) ==
        "herd::Tensor: shape [1152921504606846976,2] of float64 (2305843009213693952 elements of "
        "8 bytes) is larger than 2^63-1 bytes");
  // A zero extent does not excuse the others: their product sizes rows too.
  CHECK(error_of(DataType::kUInt8, {0, int64_t{1} << 62, 4}, &tensor) ==
        "herd::Tensor: shape [0,4611686018427387904,4] has more elements than 2^63-1 (the "
        "product of its extents overflows int64)");
  CHECK(tensor.shape() == std::vector<int64_t>{2, 3});
  CHECK(tensor.data() == data);
}

TEST_CASE("tensor: a view's size is checked the same way", "[tensor]") {
  const TensorView fits{nullptr, DataType::kInt64, {int64_t{1} << 30, int64_t{1} << 29}};
  CHECK(fits.num_elements() == int64_t{1} << 59);
  CHECK(fits.num_bytes() == std::size_t{1} << 62);
  const TensorView empty{nullptr, DataType::kInt64, {int64_t{1} << 40, 0, int64_t{1} << 19}};
  CHECK(empty.num_elements() == 0);
  CHECK(empty.num_bytes() == 0);
  const TensorView wraps{nullptr, DataType::kFloat32, {(int64_t{1} << 62) + 1, 4}};
  CHECK_THROWS_WITH(wraps.num_elements(),
                    "herd::TensorView: shape [4611686018427387905,4] has more elements than 2^63-1 "
                    "(the product of its extents overflows int64)");
  const TensorView too_many_bytes{nullptr, DataType::kInt16, {int64_t{1} << 62}};
  CHECK_THROWS_AS(too_many_bytes.num_bytes(), Error);
  const TensorView negative{nullptr, DataType::kInt16, {3, -2}};
  CHECK_THROWS_WITH(negative.num_elements(),
                    "herd::TensorView: shape [3,-2] has a negative extent (-2 in dimension 1)");
}

TEST_CASE("tensor: the largest sizes that fit are accepted by the check", "[tensor]") {
  detail::ShapeSize size;
  REQUIRE(detail::checked_shape_size("x", {INT64_MAX}, DataType::kUInt8, &size).is_ok());
  CHECK(size.elements == INT64_MAX);
  CHECK(size.bytes == INT64_MAX);
  REQUIRE(detail::checked_shape_size("x", {int64_t{1} << 61, 3}, DataType::kUInt8, &size).is_ok());
  CHECK(size.bytes == 3 * (int64_t{1} << 61));
  const Status over =
      detail::checked_shape_size("x", {int64_t{1} << 61, 3}, DataType::kInt16, &size);
  REQUIRE_FALSE(over.is_ok());
  CHECK(over.message() ==
        "x shape [2305843009213693952,3] of int16 (6917529027641081856 elements of 2 bytes) is "
        "larger than 2^63-1 bytes");
  REQUIRE(detail::checked_shape_size("x", {}, DataType::kFloat64, &size).is_ok());
  CHECK(size.elements == 1);
  CHECK(size.bytes == 8);
}

TEST_CASE("tensor: zero extents are accepted", "[tensor]") {
  Tensor tensor(DataType::kFloat32, {3, 0});
  CHECK(tensor.num_elements() == 0);
  CHECK(tensor.num_bytes() == 0);
  CHECK(tensor.data() != nullptr);
  tensor.reset(DataType::kUInt8, {});
  CHECK(tensor.num_elements() == 1);
}

}  // namespace
}  // namespace herd
