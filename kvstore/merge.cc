// Summing a push's values (kvstore/merge.h).
#include "kvstore/merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "herd/error.h"
#include "herd/float16.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

template <typename T>
void add_into(T* acc, const T* value, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    // Unsigned arithmetic wraps where a signed overflow would be undefined.
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < n; ++i) {
      acc[i] = static_cast<T>(static_cast<U>(static_cast<U>(acc[i]) + static_cast<U>(value[i])));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += value[i];
  }
}

float bfloat16_to_float(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

// Round to nearest even; a NaN stays a (quiet) NaN.
uint16_t float_to_bfloat16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x40u);
  word += 0x7fffu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}

// acc += value for 16-bit floats: widen to float, add, round back, as a
// device adding in the type would.
void add_half_into(DataType dtype, uint16_t* acc, const uint16_t* value, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DataType::kFloat16) {
      float a, b;
      float16_to_float(&acc[i], &a, 1);
      float16_to_float(&value[i], &b, 1);
      const float sum = a + b;
      float_to_float16(&sum, &acc[i], 1);
    } else {
      acc[i] = float_to_bfloat16(bfloat16_to_float(acc[i]) + bfloat16_to_float(value[i]));
    }
  }
}

void add_into(DataType dtype, void* acc, const void* value, int64_t n) {
  switch (dtype) {
    case DataType::kUInt8:
      return add_into(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(value), n);
    case DataType::kInt8:
      return add_into(static_cast<int8_t*>(acc), static_cast<const int8_t*>(value), n);
    case DataType::kInt16:
      return add_into(static_cast<int16_t*>(acc), static_cast<const int16_t*>(value), n);
    case DataType::kInt32:
      return add_into(static_cast<int32_t*>(acc), static_cast<const int32_t*>(value), n);
    case DataType::kInt64:
      return add_into(static_cast<int64_t*>(acc), static_cast<const int64_t*>(value), n);
    case DataType::kFloat32:
      return add_into(static_cast<float*>(acc), static_cast<const float*>(value), n);
    case DataType::kFloat64:
      return add_into(static_cast<double*>(acc), static_cast<const double*>(value), n);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return add_half_into(dtype, static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(value),
                           n);
  }
  throw Error(fmt::format("kvstore: cannot sum values of type {}", to_string(dtype)));
}

}  // namespace

void sum_values(const std::vector<TensorView>& values, TensorView out) {
  const int64_t n = out.num_elements();
  if (values.empty()) return;
  if (values[0].data != out.data && out.num_bytes() > 0) {
    std::memcpy(out.data, values[0].data, out.num_bytes());
  }
  for (std::size_t i = 1; i < values.size(); ++i) add_into(out.dtype, out.data, values[i].data, n);
}

void sum_compressed(const CompressionParams& params, const std::vector<TensorView>& values,
                    std::vector<std::vector<float>>& residuals, TensorView out) {
  const int64_t n = out.num_elements();
  auto* sum = static_cast<float*>(out.data);
  std::fill(sum, sum + n, 0.0f);
  std::vector<uint8_t> codes(static_cast<std::size_t>(compressed_bytes(params.type, n)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    quantize(params, static_cast<const float*>(values[i].data), residuals[i].data(), n,
             codes.data());
    dequantize_add(params, codes.data(), n, sum);
  }
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
