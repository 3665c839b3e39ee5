// scale, divide and average: integer scaling truncated toward zero and
// saturated, truncating integer division, an average and its postscale
// applied as one factor, floating multiplication in each type's own
// precision, and the untouched-memory fast paths.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/enforce.h"
#include "ops/reduce.h"
#include "ops_reference.h"

namespace herd::ops {
namespace {

using testing::Bytes;
using testing::first_mismatch;
using testing::SmallFloatFormat;

constexpr DataType kIntegerTypes[] = {DataType::kUInt8, DataType::kInt8, DataType::kInt16,
                                      DataType::kInt32, DataType::kInt64};

template <typename T>
std::vector<T> scaled(std::vector<T> values, DataType dtype, double factor) {
  scale(values.data(), static_cast<int64_t>(values.size()), dtype, factor);
  return values;
}

template <typename T>
std::vector<T> divided(std::vector<T> values, DataType dtype, int64_t divisor) {
  divide(values.data(), static_cast<int64_t>(values.size()), dtype, divisor);
  return values;
}

template <typename T>
std::vector<T> averaged(std::vector<T> values, DataType dtype, int64_t ranks, double postscale) {
  average(values.data(), static_cast<int64_t>(values.size()), dtype, ranks, postscale);
  return values;
}

// The integer limits of `dtype` as doubles; the tests keep within +-2^53.
std::pair<double, double> ref_limits(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return {0, 255};
    case DataType::kInt8: return {-128, 127};
    case DataType::kInt16: return {-32768, 32767};
    case DataType::kInt32: return {-2147483648.0, 2147483647.0};
    default: return {-9223372036854775808.0, 9223372036854775807.0};
  }
}

// Truncation toward zero without std::trunc: the magnitude rounded down,
// with x's sign.
double ref_truncate(double x) {
  const double magnitude = std::floor(std::fabs(x));
  return x < 0 ? -magnitude : magnitude;
}

// Inputs for integer sweeps: small values of both signs (none below 0 for
// uint8) plus each type's extremes, so that saturation is exercised.
std::vector<double> integer_inputs(DataType dtype, std::size_t count, std::mt19937_64& rng) {
  const auto [lo, hi] = ref_limits(dtype);
  const double bound = std::min(hi, 1000.0);
  std::uniform_int_distribution<int64_t> dist(lo < 0 ? -static_cast<int64_t>(bound) : 0,
                                              static_cast<int64_t>(bound));
  std::vector<double> values(count);
  for (double& v : values) v = static_cast<double>(dist(rng));
  if (dtype != DataType::kInt64) {  // int64 extremes are not exact in double
    values[0] = lo;
    values[1] = hi;
  }
  return values;
}

}  // namespace

TEST_CASE("scale: integers truncate toward zero and saturate", "[scale]") {
  // Halves and other fractions drop toward zero, on both signs.
  CHECK(scaled<int32_t>({5, -5, 3, -3, 7, -7, 1, -1}, DataType::kInt32, 0.5) ==
        std::vector<int32_t>{2, -2, 1, -1, 3, -3, 0, 0});
  CHECK(scaled<int32_t>({1, -1, 100, -100}, DataType::kInt32, 0.999) ==
        std::vector<int32_t>{0, 0, 99, -99});
  CHECK(scaled<int64_t>({-9, 9, 10, -10}, DataType::kInt64, 0.25) ==
        std::vector<int64_t>{-2, 2, 2, -2});
  CHECK(scaled<int8_t>({100, -100, 64, -64, 63}, DataType::kInt8, 2.0) ==
        std::vector<int8_t>{127, -128, 127, -128, 126});
  // Just past a limit, truncation lands back on it; rounding would not
  // (-127 * 1.0078125 is -127.9921875).
  CHECK(scaled<int8_t>({127, -128, -127, 126}, DataType::kInt8, 1.0078125) ==
        std::vector<int8_t>{127, -128, -127, 126});
  CHECK(scaled<int32_t>({2147483647, -2147483647 - 1, 1000}, DataType::kInt32, 1.0000000001) ==
        std::vector<int32_t>{2147483647, -2147483647 - 1, 1000});
  CHECK(scaled<int16_t>({20000, -20000, 16384, -16384, 16383, -5, 5}, DataType::kInt16, 2.0) ==
        std::vector<int16_t>{32767, -32768, 32767, -32768, 32766, -10, 10});
  CHECK(scaled<int16_t>({5, -5, 3, -3, -32768}, DataType::kInt16, 0.5) ==
        std::vector<int16_t>{2, -2, 1, -1, -16384});
  // uint8: a product in (-1, 0) truncates to 0; anything at or below -1
  // saturates at 0.
  CHECK(scaled<uint8_t>({10, 200, 0}, DataType::kUInt8, -1.0) == std::vector<uint8_t>{0, 0, 0});
  CHECK(scaled<uint8_t>({1, 3, 255}, DataType::kUInt8, -0.5) == std::vector<uint8_t>{0, 0, 0});
  CHECK(scaled<uint8_t>({200, 127, 1, 255}, DataType::kUInt8, 2.0) ==
        std::vector<uint8_t>{255, 254, 2, 255});
  CHECK(scaled<uint8_t>({255, 3}, DataType::kUInt8, 0.5) == std::vector<uint8_t>{127, 1});
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  CHECK(scaled<int64_t>({kInt64Max, kInt64Min, 3}, DataType::kInt64, 2.0) ==
        std::vector<int64_t>{kInt64Max, kInt64Min, 6});
  // int64 max is 2^63 in double: half of it is 2^62.
  CHECK(scaled<int64_t>({kInt64Max, kInt64Min}, DataType::kInt64, 0.5) ==
        std::vector<int64_t>{int64_t{1} << 62, -(int64_t{1} << 62)});
  // Non-finite factors: infinity saturates by sign; 0 * inf and NaN have no
  // integer to truncate to and give 0.
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(scaled<int32_t>({4, -4, 0}, DataType::kInt32, inf) ==
        std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min(), 0});
  CHECK(scaled<int8_t>({4, -4}, DataType::kInt8, std::nan("")) == std::vector<int8_t>{0, 0});
  CHECK(scaled<int16_t>({4, -4, 0}, DataType::kInt16, -inf) ==
        std::vector<int16_t>{-32768, 32767, 0});
  CHECK(scaled<int16_t>({4, -4}, DataType::kInt16, std::nan("")) == std::vector<int16_t>{0, 0});
  CHECK(scaled<int64_t>({4, -4, 0}, DataType::kInt64, -inf) ==
        std::vector<int64_t>{kInt64Min, kInt64Max, 0});
  CHECK(scaled<uint8_t>({4, 0}, DataType::kUInt8, std::nan("")) == std::vector<uint8_t>{0, 0});
}

TEST_CASE("scale: integer sweep against the reference", "[scale]") {
  for (DataType dtype : kIntegerTypes) {
    for (double factor : {0.5, 1.5, -2.25, 0.125, 3.0, -0.375}) {
      std::mt19937_64 rng(7);
      const std::vector<double> values = integer_inputs(dtype, 1023, rng);
      const auto [lo, hi] = ref_limits(dtype);
      std::vector<double> expected(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        expected[i] = std::min(hi, std::max(lo, ref_truncate(values[i] * factor)));
      }
      Bytes buf = testing::to_bytes(values, dtype);
      scale(buf.data(), static_cast<int64_t>(values.size()), dtype, factor);
      INFO("dtype " << to_string(dtype) << ", factor " << factor);
      CHECK(first_mismatch(buf, expected, dtype) == "");
    }
  }
}

TEST_CASE("scale: floating types multiply in their own precision", "[scale]") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> dist(-1000.0, 1000.0);
  const std::size_t count = 2500;  // crosses the 16-bit staging blocks
  for (double factor : {0.1, -3.0, 1e-3, 0.0}) {
    std::vector<double> raw(count);
    for (double& v : raw) v = dist(rng);

    std::vector<double> f64(raw);
    std::vector<double> f64_expected(count);
    for (std::size_t i = 0; i < count; ++i) f64_expected[i] = raw[i] * factor;
    scale(f64.data(), static_cast<int64_t>(count), DataType::kFloat64, factor);
    INFO("factor " << factor);
    CHECK(f64 == f64_expected);

    std::vector<float> f32(count);
    std::vector<float> f32_expected(count);
    for (std::size_t i = 0; i < count; ++i) {
      f32[i] = static_cast<float>(raw[i]);
      f32_expected[i] = f32[i] * static_cast<float>(factor);
    }
    scale(f32.data(), static_cast<int64_t>(count), DataType::kFloat32, factor);
    CHECK(f32 == f32_expected);

    struct Case {
      DataType dtype;
      SmallFloatFormat format;
    };
    for (const Case& c : {Case{DataType::kFloat16, testing::kBinary16},
                          Case{DataType::kBFloat16, testing::kBFloat16Format}}) {
      Bytes buf(count * 2);
      std::vector<double> expected(count);
      for (std::size_t i = 0; i < count; ++i) {
        const uint16_t bits = testing::ref_encode(raw[i], c.format);
        testing::store_as(buf, i, bits);
        const float product =
            static_cast<float>(testing::ref_decode(bits, c.format)) * static_cast<float>(factor);
        expected[i] = testing::ref_decode(testing::ref_encode(product, c.format), c.format);
      }
      scale(buf.data(), static_cast<int64_t>(count), c.dtype, factor);
      INFO("dtype " << to_string(c.dtype));
      CHECK(first_mismatch(buf, expected, c.dtype) == "");
    }
  }
}

TEST_CASE("scale: factor 1.0 and count 0 leave memory untouched", "[scale]") {
  // A signalling NaN would come back quiet if it went through float32.
  std::vector<uint16_t> halves{0x7C01, 0x7F81, 0x1234};
  scale(halves.data(), 3, DataType::kFloat16, 1.0);
  scale(halves.data(), 3, DataType::kBFloat16, 1.0);
  CHECK(halves == std::vector<uint16_t>{0x7C01, 0x7F81, 0x1234});
  for (DataType dtype : testing::kAllDataTypes) {
    scale(nullptr, 0, dtype, 2.0);
    divide(nullptr, 0, dtype, 3);
  }
}

TEST_CASE("divide: integers truncate toward zero", "[divide]") {
  CHECK(divided<int32_t>({7, -7, 6, -6, 1, -1, 0}, DataType::kInt32, 2) ==
        std::vector<int32_t>{3, -3, 3, -3, 0, 0, 0});
  CHECK(divided<int8_t>({-128, 127, -5}, DataType::kInt8, 3) == std::vector<int8_t>{-42, 42, -1});
  CHECK(divided<int8_t>({-128, 127}, DataType::kInt8, 1000) == std::vector<int8_t>{0, 0});
  CHECK(divided<int16_t>({-32768, 32767, -5, 7}, DataType::kInt16, 3) ==
        std::vector<int16_t>{-10922, 10922, -1, 2});
  CHECK(divided<int16_t>({-32768, 32767}, DataType::kInt16, 100000) == std::vector<int16_t>{0, 0});
  CHECK(divided<uint8_t>({255, 3}, DataType::kUInt8, 4) == std::vector<uint8_t>{63, 0});
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  CHECK(divided<int64_t>({kInt64Min, kInt64Max, -9}, DataType::kInt64, 2) ==
        std::vector<int64_t>{kInt64Min / 2, kInt64Max / 2, -4});
  CHECK(divided<int64_t>({kInt64Min, -7}, DataType::kInt64, 1) ==
        std::vector<int64_t>{kInt64Min, -7});
}

TEST_CASE("divide: integer sweep against the reference", "[divide]") {
  for (DataType dtype : kIntegerTypes) {
    for (int64_t divisor : {2, 3, 7, 64, 100000}) {
      std::mt19937_64 rng(11);
      const std::vector<double> values = integer_inputs(dtype, 1023, rng);
      std::vector<double> expected(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        // |x| / d rounded down, with x's sign: truncation toward zero.
        const double quotient = std::floor(std::fabs(values[i]) / static_cast<double>(divisor));
        expected[i] = values[i] < 0 ? -quotient : quotient;
      }
      Bytes buf = testing::to_bytes(values, dtype);
      divide(buf.data(), static_cast<int64_t>(values.size()), dtype, divisor);
      INFO("dtype " << to_string(dtype) << ", divisor " << divisor);
      CHECK(first_mismatch(buf, expected, dtype) == "");
    }
  }
}

TEST_CASE("divide: floating types multiply by the reciprocal", "[divide]") {
  std::vector<double> f64{1.0, -7.0, 3.0, 0.5};
  std::vector<double> f64_expected(f64.size());
  for (std::size_t i = 0; i < f64.size(); ++i) f64_expected[i] = f64[i] * (1.0 / 3.0);
  divide(f64.data(), static_cast<int64_t>(f64.size()), DataType::kFloat64, 3);
  CHECK(f64 == f64_expected);

  std::vector<float> f32{1.0f, -7.0f, 3.0f, 0.5f};
  std::vector<float> f32_expected(f32.size());
  for (std::size_t i = 0; i < f32.size(); ++i)
    f32_expected[i] = f32[i] * static_cast<float>(1.0 / 3.0);
  divide(f32.data(), static_cast<int64_t>(f32.size()), DataType::kFloat32, 3);
  CHECK(f32 == f32_expected);

  // Averages that are exact in the 16-bit formats.
  const std::vector<double> sums{8, -6, 3, 0};
  const std::vector<double> averages{2, -1.5, 0.75, 0};
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    Bytes buf = testing::to_bytes(sums, dtype);
    divide(buf.data(), static_cast<int64_t>(sums.size()), dtype, 4);
    INFO("dtype " << to_string(dtype));
    CHECK(first_mismatch(buf, averages, dtype) == "");
  }
}

TEST_CASE("divide: a divisor below 1 is a caller bug and throws", "[divide]") {
  int32_t x = 4;
  CHECK_THROWS_AS(divide(&x, 1, DataType::kInt32, 0), detail::InternalError);
  CHECK_THROWS_AS(divide(&x, 1, DataType::kFloat32, -2), detail::InternalError);
  CHECK(x == 4);
}

TEST_CASE("average: integers divide exactly, or scale once with a postscale", "[average]") {
  CHECK(averaged<int32_t>({7, -7, 6, -6, 1, -1}, DataType::kInt32, 2, 1.0) ==
        std::vector<int32_t>{3, -3, 3, -3, 0, 0});
  // The exact quotient, also where 1/49 in double times 49 is below 1.
  CHECK(averaged<int32_t>({49, -49, 98, 4900}, DataType::kInt32, 49, 1.0) ==
        std::vector<int32_t>{1, -1, 2, 100});
  CHECK(averaged<int64_t>({-9, 9, 10}, DataType::kInt64, 4, 1.0) == std::vector<int64_t>{-2, 2, 2});
  // With a postscale: one truncation of sum * (postscale / ranks), so
  // 7 / 2 * 3 gives 10 (from 10.5), where dividing first would give 9.
  CHECK(averaged<int32_t>({7, -7, 5, -5}, DataType::kInt32, 2, 3.0) ==
        std::vector<int32_t>{10, -10, 7, -7});
  // postscale / ranks is exactly 1: the sum comes back unchanged.
  CHECK(averaged<int16_t>({7, -7, 32767, -32768}, DataType::kInt16, 3, 3.0) ==
        std::vector<int16_t>{7, -7, 32767, -32768});
  CHECK(averaged<int64_t>({10, -10}, DataType::kInt64, 4, 0.5) == std::vector<int64_t>{1, -1});
  // Saturation and the unsigned floor, as scale.
  CHECK(averaged<uint8_t>({200, 3}, DataType::kUInt8, 2, 3.0) == std::vector<uint8_t>{255, 4});
  CHECK(averaged<int8_t>({100, -100}, DataType::kInt8, 2, 4.0) == std::vector<int8_t>{127, -128});
  CHECK(averaged<uint8_t>({200, 3}, DataType::kUInt8, 2, -1.0) == std::vector<uint8_t>{0, 0});
}

TEST_CASE("average: floating types multiply once by postscale / ranks", "[average]") {
  std::vector<double> f64{1.0, -7.0, 3.0, 0.5};
  std::vector<double> f64_expected(f64.size());
  for (std::size_t i = 0; i < f64.size(); ++i) f64_expected[i] = f64[i] * (2.0 / 3.0);
  average(f64.data(), static_cast<int64_t>(f64.size()), DataType::kFloat64, 3, 2.0);
  CHECK(f64 == f64_expected);

  std::vector<float> f32{1.0f, -7.0f, 3.0f, 0.5f, 1e30f};
  std::vector<float> f32_expected(f32.size());
  for (std::size_t i = 0; i < f32.size(); ++i)
    f32_expected[i] = f32[i] * static_cast<float>(0.1 / 3.0);
  average(f32.data(), static_cast<int64_t>(f32.size()), DataType::kFloat32, 3, 0.1);
  CHECK(f32 == f32_expected);

  // Postscale 1: the reciprocal, as divide().
  std::vector<float> reciprocal{1.0f, -7.0f};
  average(reciprocal.data(), 2, DataType::kFloat32, 3, 1.0);
  CHECK(reciprocal == std::vector<float>{1.0f * static_cast<float>(1.0 / 3.0),
                                         -7.0f * static_cast<float>(1.0 / 3.0)});

  // Exact in the 16-bit formats: sum / 4 * 3.
  const std::vector<double> sums{8, -6, 3, 0};
  const std::vector<double> expected{6, -4.5, 2.25, 0};
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    Bytes buf = testing::to_bytes(sums, dtype);
    average(buf.data(), static_cast<int64_t>(sums.size()), dtype, 4, 3.0);
    INFO("dtype " << to_string(dtype));
    CHECK(first_mismatch(buf, expected, dtype) == "");
  }
}

TEST_CASE("average: ranks below 1 is a caller bug and throws", "[average]") {
  int32_t x = 4;
  CHECK_THROWS_AS(average(&x, 1, DataType::kInt32, 0, 1.0), detail::InternalError);
  CHECK_THROWS_AS(average(&x, 1, DataType::kFloat32, -2, 2.0), detail::InternalError);
  CHECK(x == 4);
  for (DataType dtype : testing::kAllDataTypes) average(nullptr, 0, dtype, 3, 2.0);
}

}  // namespace herd::ops

TEST_CASE("fill_identity: reducing the identity into a value leaves the value", "[ops][identity]") {
  using herd::DataType;
  using herd::ReduceOp;
  const DataType dtypes[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                             DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                             DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
  for (DataType dtype : dtypes) {
    for (ReduceOp op : ops) {
      INFO(herd::to_string(dtype) << " " << herd::to_string(op));
      const std::size_t size = herd::element_size(dtype);
      // A few bit patterns of ordinary values: small positive and negative
      // numbers in every type (for unsigned types the "negative" ones are large).
      std::vector<uint8_t> values(size * 4);
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = static_cast<uint8_t>(0x11 * (i + 1));
      if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
        const uint16_t half[] = {0x3C00, 0xC000, 0x4248, 0x0001};    // 1, -2, 3.14, tiny
        const uint16_t bfloat[] = {0x3F80, 0xC000, 0x4049, 0x0080};  // 1, -2, 3.14, tiny
        std::memcpy(values.data(), dtype == DataType::kFloat16 ? half : bfloat, sizeof half);
      }
      if (dtype == DataType::kFloat32) {
        const float f[] = {1.5f, -2.25f, 1e30f, -1e-30f};
        std::memcpy(values.data(), f, sizeof f);
      }
      if (dtype == DataType::kFloat64) {
        const double d[] = {1.5, -2.25, 1e300, -1e-300};
        std::memcpy(values.data(), d, sizeof d);
      }
      std::vector<uint8_t> reduced = values;
      std::vector<uint8_t> identity(values.size());
      herd::ops::fill_identity(identity.data(), 4, dtype, op);
      herd::ops::reduce_into(reduced.data(), identity.data(), 4, dtype, op);
      CHECK(reduced == values);
    }
  }
}
