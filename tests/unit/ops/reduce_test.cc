// reduce_into and make_reduce_fn (three operands, into a third buffer or onto
// an operand) against plain double arithmetic: every
// dtype x op x count with inputs the reference computes exactly, integer
// wraparound, NaN handling, aliasing, and the float32 route of the 16-bit
// formats on random bit patterns.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
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
using testing::kAllDataTypes;
using testing::kAllReduceOps;
using testing::SmallFloatFormat;

constexpr int64_t kCounts[] = {0, 1, 7, 1023, 100003};

// Inputs are integers in [lo, hi] divided by `denominator`, chosen per dtype
// so that the op's result is exactly representable (no rounding, no
// overflow) and double arithmetic is therefore an exact reference.
struct ValueRange {
  int64_t lo;
  int64_t hi;
  double denominator;
};

ValueRange sum_range(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return {0, 127, 1};
    case DataType::kInt8: return {-64, 63, 1};
    case DataType::kInt16: return {-16384, 16383, 1};
    case DataType::kInt32: return {-1'000'000'000, 1'000'000'000, 1};
    case DataType::kInt64: return {-(int64_t{1} << 50), int64_t{1} << 50, 1};
    case DataType::kFloat16: return {-1000, 1000, 4};  // sums need <= 11 bits
    case DataType::kBFloat16: return {-127, 127, 4};   // sums need <= 8 bits
    case DataType::kFloat32: return {-(1 << 22), 1 << 22, 4};
    case DataType::kFloat64: return {-(int64_t{1} << 50), int64_t{1} << 50, 4};
  }
  return {0, 0, 1};
}

// Min and max only pick an input, so the whole exactly-held range is fair.
ValueRange min_max_range(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return {0, 255, 1};
    case DataType::kInt8: return {-128, 127, 1};
    case DataType::kInt16: return {-32768, 32767, 1};
    case DataType::kInt32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 1};
    case DataType::kInt64: return {-(int64_t{1} << 53), int64_t{1} << 53, 1};
    case DataType::kFloat16: return {-2047, 2047, 8};
    case DataType::kBFloat16: return {-255, 255, 2};
    case DataType::kFloat32: return {-(1 << 24), 1 << 24, 16};
    case DataType::kFloat64: return {-(int64_t{1} << 53), int64_t{1} << 53, 1024};
  }
  return {0, 0, 1};
}

std::vector<double> make_inputs(DataType dtype, ReduceOp op, int64_t count, std::mt19937_64& rng) {
  std::vector<double> values(static_cast<std::size_t>(count));
  if (op == ReduceOp::kProduct) {
    // Products of two of these stay tiny in every type.
    const std::vector<double> choices =
        dtype == DataType::kUInt8 ? std::vector<double>{0, 1, 2} : std::vector<double>{1, 2, -1};
    std::uniform_int_distribution<std::size_t> pick(0, choices.size() - 1);
    for (double& v : values) v = choices[pick(rng)];
    return values;
  }
  const ValueRange range =
      (op == ReduceOp::kMin || op == ReduceOp::kMax) ? min_max_range(dtype) : sum_range(dtype);
  std::uniform_int_distribution<int64_t> dist(range.lo, range.hi);
  for (double& v : values) v = static_cast<double>(dist(rng)) / range.denominator;
  return values;
}

double ref_apply(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;  // averaging divides later, not here
    case ReduceOp::kMin: return b < a ? b : a;
    case ReduceOp::kMax: return a < b ? b : a;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kAdasum: break;  // not element-wise: ops/adasum.h
  }
  return 0;
}

template <typename T>
std::vector<T> reduce_typed(std::vector<T> dst, const std::vector<T>& src, DataType dtype,
                            ReduceOp op) {
  reduce_into(dst.data(), src.data(), static_cast<int64_t>(dst.size()), dtype, op);
  return dst;
}

}  // namespace

TEST_CASE("reduce_into matches the reference for every dtype, op and count", "[reduce]") {
  uint64_t seed = 1;
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (int64_t count : kCounts) {
        std::mt19937_64 rng(seed++);
        const std::vector<double> dst_values = make_inputs(dtype, op, count, rng);
        const std::vector<double> src_values = make_inputs(dtype, op, count, rng);
        std::vector<double> expected(dst_values.size());
        for (std::size_t i = 0; i < expected.size(); ++i)
          expected[i] = ref_apply(op, dst_values[i], src_values[i]);

        Bytes through_call = testing::to_bytes(dst_values, dtype);
        const Bytes first = through_call;
        const Bytes src = testing::to_bytes(src_values, dtype);
        // The three-operand form into a third buffer, and onto its second operand.
        Bytes through_fn(through_call.size(), 0xAB);
        Bytes onto_second = src;
        // count 0 must not touch the pointers at all.
        const auto dst_ptr = [&](Bytes& b) -> void* { return count == 0 ? nullptr : b.data(); };
        const auto in_ptr = [&](const Bytes& b) -> const void* {
          return count == 0 ? nullptr : b.data();
        };
        reduce_into(dst_ptr(through_call), in_ptr(src), count, dtype, op);
        const ReduceFn reduce = make_reduce_fn(dtype, op);
        reduce(dst_ptr(through_fn), in_ptr(first), in_ptr(src), count);
        reduce(dst_ptr(onto_second), in_ptr(first), dst_ptr(onto_second), count);

        INFO("dtype " << to_string(dtype) << ", op " << to_string(op) << ", count " << count);
        CHECK(first_mismatch(through_call, expected, dtype) == "");
        CHECK(first_mismatch(through_fn, expected, dtype) == "");
        CHECK(first_mismatch(onto_second, expected, dtype) == "");
        CHECK(first == testing::to_bytes(dst_values, dtype));  // operands untouched
        CHECK(src == testing::to_bytes(src_values, dtype));
      }
    }
  }
}

TEST_CASE("reduce_into works in place and on element-offset buffers", "[reduce]") {
  for (DataType dtype : kAllDataTypes) {
    std::mt19937_64 rng(99);
    const int64_t count = 1023;
    // One spare element in front, so the kernel sees a pointer that is only
    // element-aligned, never vector-aligned by accident.
    std::vector<double> values = make_inputs(dtype, ReduceOp::kSum, count + 1, rng);
    std::vector<double> expected(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      expected[i] = i == 0 ? values[i] : 2 * values[i];
    Bytes buf = testing::to_bytes(values, dtype);
    void* shifted = buf.data() + testing::ref_element_size(dtype);
    reduce_into(shifted, shifted, count, dtype, ReduceOp::kSum);
    INFO("dtype " << to_string(dtype));
    CHECK(first_mismatch(buf, expected, dtype) == "");
  }
}

TEST_CASE("integer sums and products wrap around in two's complement", "[reduce]") {
  CHECK(reduce_typed<uint8_t>({200, 255, 16, 0}, {100, 1, 16, 255}, DataType::kUInt8,
                              ReduceOp::kSum) == std::vector<uint8_t>{44, 0, 32, 255});
  CHECK(reduce_typed<uint8_t>({200, 16, 255, 200}, {100, 16, 255, 2}, DataType::kUInt8,
                              ReduceOp::kProduct) == std::vector<uint8_t>{32, 0, 1, 144});
  CHECK(reduce_typed<int8_t>({100, -128, 127, -100}, {100, -1, 1, -100}, DataType::kInt8,
                             ReduceOp::kSum) == std::vector<int8_t>{-56, 127, -128, 56});
  CHECK(reduce_typed<int8_t>({64, -128, -128}, {2, -1, -128}, DataType::kInt8,
                             ReduceOp::kProduct) == std::vector<int8_t>{-128, -128, 0});
  // Average reduces as a plain sum, so it wraps the same way.
  CHECK(reduce_typed<int8_t>({100}, {100}, DataType::kInt8, ReduceOp::kAverage) ==
        std::vector<int8_t>{-56});

  // int16: 30000 + 30000 = 60000 - 2^16; products modulo 2^16, including
  // (-1) * (-1), whose unsigned operands 65535 * 65535 overflow an int.
  CHECK(reduce_typed<int16_t>({30000, -32768, 32767, -30000}, {30000, -1, 1, -30000},
                              DataType::kInt16,
                              ReduceOp::kSum) == std::vector<int16_t>{-5536, 32767, -32768, 5536});
  CHECK(reduce_typed<int16_t>({256, -32768, -32768, 255, -255, -1, -2},
                              {256, -1, -32768, 255, 257, -1, 32767}, DataType::kInt16,
                              ReduceOp::kProduct) ==
        std::vector<int16_t>{0, -32768, 0, -511, 1, 1, 2});
  CHECK(reduce_typed<int16_t>({30000}, {30000}, DataType::kInt16, ReduceOp::kAverage) ==
        std::vector<int16_t>{-5536});

  constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
  CHECK(reduce_typed<int32_t>({kInt32Max, kInt32Min}, {1, -1}, DataType::kInt32, ReduceOp::kSum) ==
        std::vector<int32_t>{kInt32Min, kInt32Max});
  CHECK(reduce_typed<int32_t>({65536, kInt32Min}, {65536, -1}, DataType::kInt32,
                              ReduceOp::kProduct) == std::vector<int32_t>{0, kInt32Min});

  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  CHECK(reduce_typed<int64_t>({kInt64Max, kInt64Min}, {1, kInt64Min}, DataType::kInt64,
                              ReduceOp::kSum) == std::vector<int64_t>{kInt64Min, 0});
  CHECK(reduce_typed<int64_t>({kInt64Min, int64_t{1} << 32}, {-1, int64_t{1} << 32},
                              DataType::kInt64,
                              ReduceOp::kProduct) == std::vector<int64_t>{kInt64Min, 0});
}

TEST_CASE("integer min and max at the type limits", "[reduce]") {
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  CHECK(reduce_typed<int64_t>({kInt64Min, kInt64Max, -1}, {kInt64Max, kInt64Min, 0},
                              DataType::kInt64,
                              ReduceOp::kMin) == std::vector<int64_t>{kInt64Min, kInt64Min, -1});
  CHECK(reduce_typed<int64_t>({kInt64Min, kInt64Max, -1}, {kInt64Max, kInt64Min, 0},
                              DataType::kInt64,
                              ReduceOp::kMax) == std::vector<int64_t>{kInt64Max, kInt64Max, 0});
  CHECK(reduce_typed<uint8_t>({0, 255}, {255, 0}, DataType::kUInt8, ReduceOp::kMin) ==
        std::vector<uint8_t>{0, 0});
  CHECK(reduce_typed<int8_t>({-128, 127}, {127, -128}, DataType::kInt8, ReduceOp::kMax) ==
        std::vector<int8_t>{127, 127});
  CHECK(reduce_typed<int16_t>({-32768, 32767, -1}, {32767, -32768, 0}, DataType::kInt16,
                              ReduceOp::kMin) == std::vector<int16_t>{-32768, -32768, -1});
  CHECK(reduce_typed<int16_t>({-32768, 32767, -1}, {32767, -32768, 0}, DataType::kInt16,
                              ReduceOp::kMax) == std::vector<int16_t>{32767, 32767, 0});
}

TEST_CASE("floating min and max propagate NaN from either side", "[reduce]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DataType dtype :
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      // 9 elements so the vector body and the scalar tail both see a NaN.
      const std::vector<double> dst_values{nan, 1, -3, nan, 2, 5, -1, 0, nan};
      const std::vector<double> src_values{1, nan, nan, -3, 4, nan, 2, nan, nan};
      std::vector<double> expected(dst_values.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const bool any_nan = std::isnan(dst_values[i]) || std::isnan(src_values[i]);
        expected[i] = any_nan ? nan : ref_apply(op, dst_values[i], src_values[i]);
      }
      Bytes dst = testing::to_bytes(dst_values, dtype);
      const Bytes src = testing::to_bytes(src_values, dtype);
      reduce_into(dst.data(), src.data(), static_cast<int64_t>(expected.size()), dtype, op);
      INFO("dtype " << to_string(dtype) << ", op " << to_string(op));
      CHECK(first_mismatch(dst, expected, dtype) == "");
    }
  }
}

TEST_CASE("16-bit floats reduce as 'widen to float32, op, round once'", "[reduce][half]") {
  struct Case {
    DataType dtype;
    SmallFloatFormat format;
  };
  for (const Case& c : {Case{DataType::kFloat16, testing::kBinary16},
                        Case{DataType::kBFloat16, testing::kBFloat16Format}}) {
    for (ReduceOp op : kAllReduceOps) {
      std::mt19937 rng(static_cast<unsigned>(c.dtype) * 10 + static_cast<unsigned>(op));
      // Uniform over all finite bit patterns: every exponent, subnormals,
      // both zeros; 100003 crosses the kernel's block boundaries unevenly.
      const auto random_finite = [&] {
        for (;;) {
          const auto bits = static_cast<uint16_t>(rng());
          if (std::isfinite(testing::ref_decode(bits, c.format))) return bits;
        }
      };
      const std::size_t count = 100003;
      Bytes dst(count * 2);
      Bytes src(count * 2);
      for (std::size_t i = 0; i < count; ++i) {
        testing::store_as(dst, i, random_finite());
        testing::store_as(src, i, random_finite());
      }
      // Two references: the documented recipe in float32, and the correctly
      // rounded result from exact double arithmetic. They agree because
      // float32 is wide enough that double rounding is harmless.
      std::vector<double> via_float(count);
      std::vector<double> correctly_rounded(count);
      for (std::size_t i = 0; i < count; ++i) {
        const double a = testing::ref_decode(testing::load_as<uint16_t>(dst, i), c.format);
        const double b = testing::ref_decode(testing::load_as<uint16_t>(src, i), c.format);
        const float in_float =
            static_cast<float>(ref_apply(op, a, b));  // exact op, then round to float
        float recipe;
        switch (op) {
          case ReduceOp::kSum:
          case ReduceOp::kAverage: recipe = static_cast<float>(a) + static_cast<float>(b); break;
          case ReduceOp::kProduct: recipe = static_cast<float>(a) * static_cast<float>(b); break;
          default: recipe = in_float; break;
        }
        via_float[i] = testing::ref_decode(testing::ref_encode(recipe, c.format), c.format);
        correctly_rounded[i] =
            testing::ref_decode(testing::ref_encode(ref_apply(op, a, b), c.format), c.format);
      }
      reduce_into(dst.data(), src.data(), static_cast<int64_t>(count), c.dtype, op);
      INFO("dtype " << to_string(c.dtype) << ", op " << to_string(op));
      CHECK(first_mismatch(dst, via_float, c.dtype) == "");
      CHECK(first_mismatch(dst, correctly_rounded, c.dtype) == "");
    }
  }
}

TEST_CASE("make_reduce_fn binds dtype and op once", "[reduce]") {
  const ReduceFn sum = make_reduce_fn(DataType::kFloat32, ReduceOp::kSum);
  const ReduceFn max = make_reduce_fn(DataType::kInt32, ReduceOp::kMax);
  std::vector<float> f_dst{1.5f, -2.0f};
  const std::vector<float> f_src{0.25f, 2.0f};
  sum(f_dst.data(), f_dst.data(), f_src.data(), 2);
  CHECK(f_dst == std::vector<float>{1.75f, 0.0f});
  std::vector<int32_t> i_out(2, 0);
  const std::vector<int32_t> i_a{-5, 7};
  const std::vector<int32_t> i_b{-6, 3};
  max(i_out.data(), i_a.data(), i_b.data(), 2);
  CHECK(i_out == std::vector<int32_t>{-5, 7});
  sum(nullptr, nullptr, nullptr, 0);
}

TEST_CASE("a negative count is a caller bug and throws", "[reduce]") {
  float x = 0;
  CHECK_THROWS_AS(reduce_into(&x, &x, -1, DataType::kFloat32, ReduceOp::kSum),
                  detail::InternalError);
  CHECK_THROWS_AS(make_reduce_fn(DataType::kFloat32, ReduceOp::kSum)(&x, &x, &x, -1),
                  detail::InternalError);
}

}  // namespace herd::ops
