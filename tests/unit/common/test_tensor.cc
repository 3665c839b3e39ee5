// herd::Tensor's shape checks: a negative extent throws herd::Error naming
// the dimension and its value, and leaves the tensor as it was.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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
