// Scalar reference arithmetic for the ops/ unit tests.
//
// Deliberately shares no code with ops/: the 16-bit formats are decoded with
// std::ldexp and encoded with std::frexp + std::nearbyint (the default
// rounding mode is round to nearest even), and typed buffers are read and
// written one element at a time through doubles. Every helper here is exact
// as long as the values fit in a double's 53-bit significand.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "herd/types.h"

namespace herd::ops::testing {

inline constexpr DataType kAllDataTypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
};
inline constexpr ReduceOp kAllReduceOps[] = {
    ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct,
};

// A binary floating-point format narrower than float32.
struct SmallFloatFormat {
  int mantissa_bits;
  int exponent_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint32_t exponent_all_ones() const { return (1u << exponent_bits) - 1; }
};
inline constexpr SmallFloatFormat kBinary16{10, 5};
inline constexpr SmallFloatFormat kBFloat16Format{7, 8};

inline bool ref_is_nan_bits(uint16_t bits, SmallFloatFormat format) {
  const uint32_t exponent = (bits >> format.mantissa_bits) & format.exponent_all_ones();
  const uint32_t mantissa = bits & ((1u << format.mantissa_bits) - 1);
  return exponent == format.exponent_all_ones() && mantissa != 0;
}

inline double ref_decode(uint16_t bits, SmallFloatFormat format) {
  const bool negative = (bits & 0x8000u) != 0;
  const uint32_t exponent = (bits >> format.mantissa_bits) & format.exponent_all_ones();
  const uint32_t mantissa = bits & ((1u << format.mantissa_bits) - 1);
  double magnitude;
  if (exponent == format.exponent_all_ones()) {
    magnitude = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - format.bias() - format.mantissa_bits);
  } else {
    const double significand = static_cast<double>(mantissa + (1u << format.mantissa_bits));
    magnitude =
        std::ldexp(significand, static_cast<int>(exponent) - format.bias() - format.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Round `value` to the nearest representable number of `format`, ties to
// even, overflowing to infinity. A NaN becomes the canonical quiet NaN.
inline uint16_t ref_encode(double value, SmallFloatFormat format) {
  const int mb = format.mantissa_bits;
  const auto inf_bits = static_cast<uint16_t>(format.exponent_all_ones() << mb);
  if (std::isnan(value)) return static_cast<uint16_t>(inf_bits | (1u << (mb - 1)));
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return static_cast<uint16_t>(sign | inf_bits);
  const int min_normal_exponent = 1 - format.bias();
  if (magnitude < std::ldexp(1.0, min_normal_exponent)) {
    // Subnormal: count units of the smallest subnormal; 2^mb units is the
    // smallest normal, whose encoding is exactly that integer.
    const double units = std::nearbyint(std::ldexp(magnitude, mb - min_normal_exponent));
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(units));
  }
  int frexp_exponent = 0;
  std::frexp(magnitude, &frexp_exponent);
  int exponent = frexp_exponent - 1;  // magnitude in [2^exponent, 2^(exponent+1))
  double significand = std::nearbyint(std::ldexp(magnitude, mb - exponent));
  if (significand == std::ldexp(1.0, mb + 1)) {
    significand = std::ldexp(1.0, mb);
    ++exponent;
  }
  if (exponent > format.bias()) return static_cast<uint16_t>(sign | inf_bits);
  const auto biased = static_cast<uint32_t>(exponent + format.bias());
  const auto fraction = static_cast<uint32_t>(significand) - (1u << mb);
  return static_cast<uint16_t>(sign | (biased << mb) | fraction);
}

// Typed buffers, read and written through double.
using Bytes = std::vector<unsigned char>;

inline std::size_t ref_element_size(DataType dtype) {
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
  return 0;
}

template <typename T>
T load_as(const Bytes& bytes, std::size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void store_as(Bytes& bytes, std::size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

inline double get_value(const Bytes& bytes, std::size_t index, DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return load_as<uint8_t>(bytes, index);
    case DataType::kInt8: return load_as<int8_t>(bytes, index);
    case DataType::kInt16: return load_as<int16_t>(bytes, index);
    case DataType::kInt32: return load_as<int32_t>(bytes, index);
    case DataType::kInt64: return static_cast<double>(load_as<int64_t>(bytes, index));
    case DataType::kFloat16: return ref_decode(load_as<uint16_t>(bytes, index), kBinary16);
    case DataType::kBFloat16: return ref_decode(load_as<uint16_t>(bytes, index), kBFloat16Format);
    case DataType::kFloat32: return load_as<float>(bytes, index);
    case DataType::kFloat64: return load_as<double>(bytes, index);
  }
  return 0;
}

// `value` must be exactly representable in `dtype`.
inline void set_value(Bytes& bytes, std::size_t index, DataType dtype, double value) {
  switch (dtype) {
    case DataType::kUInt8: return store_as(bytes, index, static_cast<uint8_t>(value));
    case DataType::kInt8: return store_as(bytes, index, static_cast<int8_t>(value));
    case DataType::kInt16: return store_as(bytes, index, static_cast<int16_t>(value));
    case DataType::kInt32: return store_as(bytes, index, static_cast<int32_t>(value));
    case DataType::kInt64: return store_as(bytes, index, static_cast<int64_t>(value));
    case DataType::kFloat16: return store_as(bytes, index, ref_encode(value, kBinary16));
    case DataType::kBFloat16: return store_as(bytes, index, ref_encode(value, kBFloat16Format));
    case DataType::kFloat32: return store_as(bytes, index, static_cast<float>(value));
    case DataType::kFloat64: return store_as(bytes, index, value);
  }
}

inline Bytes to_bytes(const std::vector<double>& values, DataType dtype) {
  Bytes bytes(values.size() * ref_element_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) set_value(bytes, i, dtype, values[i]);
  return bytes;
}

// "" when `actual` holds exactly `expected`; otherwise the number of wrong
// elements and the first one, so that a failure prints one line, not 100k.
inline std::string first_mismatch(const Bytes& actual, const std::vector<double>& expected,
                                  DataType dtype) {
  std::size_t wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double got = get_value(actual, i, dtype);
    const bool same = got == expected[i] || (std::isnan(got) && std::isnan(expected[i]));
    if (same) continue;
    if (wrong++ == 0) first = fmt::format("index {}: expected {}, actual {}", i, expected[i], got);
  }
  if (wrong == 0) return "";
  return fmt::format("{} of {} elements wrong; first at {}", wrong, expected.size(), first);
}

}  // namespace herd::ops::testing
