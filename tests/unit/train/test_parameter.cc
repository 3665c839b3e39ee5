// herd::Parameter: float32 host views of one size, disjoint, named in every
// error.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/optimizer.h"

namespace herd {
namespace {

TEST_CASE("a parameter over raw pointers exposes its views", "[parameter]") {
  std::vector<float> w(6, 1.0f), g(6, 2.0f);
  Parameter p("fc1.weight", w.data(), g.data(), 6);
  CHECK(p.name() == "fc1.weight");
  CHECK(p.value() == w.data());
  CHECK(p.grad() == g.data());
  CHECK(p.size() == 6);
  CHECK(p.grad_view().dtype == DataType::kFloat32);
  CHECK(p.grad_view().shape == std::vector<int64_t>{6});
  CHECK(p.grad_view().data == g.data());
}

TEST_CASE("a parameter over tensor views flattens the shape", "[parameter]") {
  std::vector<float> w(6), g(6);
  Parameter p("fc1.weight", TensorView{w.data(), DataType::kFloat32, {2, 3}},
              TensorView{g.data(), DataType::kFloat32, {3, 2}});
  CHECK(p.size() == 6);
}

TEST_CASE("a parameter that is not float32 is rejected, naming it", "[parameter]") {
  std::vector<double> w(4), g(4);
  CHECK_THROWS_WITH(
      Parameter("fc2.bias", TensorView{w.data(), DataType::kFloat64, {4}},
                TensorView{g.data(), DataType::kFloat64, {4}}),
      Catch::Contains("fc2.bias") && Catch::Contains("float64") && Catch::Contains("float32 only"));
  std::vector<float> wf(4);
  std::vector<uint16_t> gh(4);
  CHECK_THROWS_WITH(
      Parameter("fc2.bias", TensorView{wf.data(), DataType::kFloat32, {4}},
                TensorView{gh.data(), DataType::kFloat16, {4}}),
      Catch::Contains("fc2.bias") && Catch::Contains("gradient") && Catch::Contains("float16"));
}

TEST_CASE("a parameter rejects bad sizes, null data, overlap and device memory", "[parameter]") {
  std::vector<float> w(6), g(6);
  CHECK_THROWS_WITH(Parameter("w", TensorView{w.data(), DataType::kFloat32, {6}},
                              TensorView{g.data(), DataType::kFloat32, {5}}),
                    Catch::Contains("'w'") && Catch::Contains("6") && Catch::Contains("5"));
  CHECK_THROWS_WITH(Parameter("w", w.data(), nullptr, 6),
                    Catch::Contains("'w'") && Catch::Contains("gradient is null"));
  CHECK_THROWS_WITH(Parameter("w", w.data(), g.data(), -1), Catch::Contains("-1"));
  CHECK_THROWS_WITH(Parameter("w", w.data(), w.data() + 3, 4), Catch::Contains("overlap"));
  CHECK_NOTHROW(Parameter("w", w.data(), w.data() + 3, 3));  // adjacent, not overlapping
  CHECK_NOTHROW(Parameter("empty", nullptr, nullptr, 0));
  CHECK_THROWS_AS(Parameter("", w.data(), g.data(), 6), Error);
  TensorView on_gpu{w.data(), DataType::kFloat32, {6}, Device::gpu(0)};
  CHECK_THROWS_WITH(Parameter("w", on_gpu, TensorView{g.data(), DataType::kFloat32, {6}}),
                    Catch::Contains("gpu:0"));
}

}  // namespace
}  // namespace herd
