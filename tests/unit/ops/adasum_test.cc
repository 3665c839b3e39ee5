// ops/adasum.h: dot products and norms summed in double, the linear
// combination rounded once to the dtype, on aligned and unaligned buffers;
// Adasum's identity for joined ranks (zeros).
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "ops/adasum.h"
#include "ops/half.h"
#include "ops/reduce.h"

namespace herd::ops {
namespace {

// `values` stored at byte offset `offset` of a fresh buffer.
template <typename T>
std::vector<unsigned char> placed(const std::vector<T>& values, std::size_t offset) {
  std::vector<unsigned char> bytes(offset + values.size() * sizeof(T));
  std::memcpy(bytes.data() + offset, values.data(), values.size() * sizeof(T));
  return bytes;
}

TEST_CASE("adasum kernels take float16, float32 and float64 only", "[adasum]") {
  CHECK(adasum_supports(DataType::kFloat16));
  CHECK(adasum_supports(DataType::kFloat32));
  CHECK(adasum_supports(DataType::kFloat64));
  CHECK_FALSE(adasum_supports(DataType::kBFloat16));
  CHECK_FALSE(adasum_supports(DataType::kInt32));
  CHECK_FALSE(adasum_supports(DataType::kUInt8));
}

TEST_CASE("dot_and_norms sums in double at any alignment", "[adasum]") {
  // 2^24 + 1 is not a float: float32 accumulation would lose the 1s.
  const std::vector<float> a = {4096.0f, 1.0f, 1.0f, -3.0f};
  const std::vector<float> b = {4096.0f, 1.0f, 2.0f, 0.5f};
  for (std::size_t offset : {0, 1, 3}) {
    INFO("offset " << offset);
    auto x = placed(a, offset);
    auto y = placed(b, offset + 2);
    const DotAndNorms sums =
        dot_and_norms(x.data() + offset, y.data() + offset + 2, 4, DataType::kFloat32);
    CHECK(sums.dot == 16777216.0 + 1 + 2 - 1.5);
    CHECK(sums.a_norm2 == 16777216.0 + 1 + 1 + 9);
    CHECK(sums.b_norm2 == 16777216.0 + 1 + 4 + 0.25);
  }
  const std::vector<uint16_t> h = {float_to_float16(0.5f), float_to_float16(-2.0f)};
  const DotAndNorms half = dot_and_norms(h.data(), h.data(), 2, DataType::kFloat16);
  CHECK(half.dot == 4.25);
  CHECK(half.a_norm2 == 4.25);
  CHECK(dot_and_norms(nullptr, nullptr, 0, DataType::kFloat64).dot == 0.0);
}

TEST_CASE("scaled_add combines in double and rounds once", "[adasum]") {
  std::vector<double> a = {1.0, 2.0, -4.0};
  const std::vector<double> b = {3.0, 0.0, 8.0};
  scaled_add(a.data(), 0.5, b.data(), 0.25, 3, DataType::kFloat64);
  CHECK(a == std::vector<double>{1.25, 1.0, 0.0});

  // float32 at an odd address: 1/3 * 3 + 1e-8 rounds to 1 in float32.
  const std::vector<float> f = {3.0f, 6.0f};
  auto bytes = placed(f, 1);
  const std::vector<float> g = {1.0f, 1.0f};
  scaled_add(bytes.data() + 1, 1.0 / 3.0, g.data(), 1e-8, 2, DataType::kFloat32);
  std::vector<float> out(2);
  std::memcpy(out.data(), bytes.data() + 1, sizeof(float) * 2);
  CHECK(out == std::vector<float>{1.0f, 2.0f});

  // float16: the combination rounded to the nearest float16.
  std::vector<uint16_t> h = {float_to_float16(1.0f), float_to_float16(100.0f)};
  const std::vector<uint16_t> k = {float_to_float16(0.001f), float_to_float16(1.0f)};
  scaled_add(h.data(), 1.0, k.data(), 1.0, 2, DataType::kFloat16);
  CHECK(h[0] == float_to_float16(static_cast<float>(1.0 + float16_to_float(k[0]))));
  CHECK(float16_to_float(h[1]) == 101.0f);
}

TEST_CASE("Adasum's identity is zero, which leaves the other vector", "[adasum]") {
  std::vector<float> buf(3, 7.0f);
  fill_identity(buf.data(), 3, DataType::kFloat32, ReduceOp::kAdasum);
  CHECK(buf == std::vector<float>(3, 0.0f));
  std::vector<uint16_t> halves(2, 1);
  fill_identity(halves.data(), 2, DataType::kFloat16, ReduceOp::kAdasum);
  CHECK(halves == std::vector<uint16_t>(2, 0));
}

}  // namespace
}  // namespace herd::ops
