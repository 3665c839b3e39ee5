// Adasum's kernels. Elements are read and written through memcpy, so a
// buffer at any byte address takes the same path (the compiler turns the
// copies into plain loads and stores).
#include "ops/adasum.h"

#include <cstring>

#include "common/enforce.h"
#include "ops/half_bits.h"

namespace herd::ops {
namespace {

// One element type as the kernels see it: read as double, written from double.
struct Float16 {
  using Storage = uint16_t;
  static double widen(Storage bits) { return detail::float16_to_float_inline(bits); }
  static Storage narrow(double value) {
    return detail::float_to_float16_inline(static_cast<float>(value));
  }
};
struct Float32 {
  using Storage = float;
  static double widen(Storage value) { return value; }
  static Storage narrow(double value) { return static_cast<float>(value); }
};
struct Float64 {
  using Storage = double;
  static double widen(Storage value) { return value; }
  static Storage narrow(double value) { return value; }
};

template <typename Type>
double load(const void* buf, int64_t i) {
  typename Type::Storage value;
  std::memcpy(&value, static_cast<const unsigned char*>(buf) + i * sizeof(value), sizeof(value));
  return Type::widen(value);
}

template <typename Type>
void store(void* buf, int64_t i, double value) {
  const typename Type::Storage narrowed = Type::narrow(value);
  std::memcpy(static_cast<unsigned char*>(buf) + i * sizeof(narrowed), &narrowed, sizeof(narrowed));
}

template <typename Type>
DotAndNorms dot_and_norms_of(const void* a, const void* b, int64_t count) {
  DotAndNorms sums;
  for (int64_t i = 0; i < count; ++i) {
    const double x = load<Type>(a, i);
    const double y = load<Type>(b, i);
    sums.dot += x * y;
    sums.a_norm2 += x * x;
    sums.b_norm2 += y * y;
  }
  return sums;
}

template <typename Type>
void scaled_add_of(void* a, double a_coeff, const void* b, double b_coeff, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    store<Type>(a, i, a_coeff * load<Type>(a, i) + b_coeff * load<Type>(b, i));
  }
}

}  // namespace

bool adasum_supports(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

DotAndNorms dot_and_norms(const void* a, const void* b, int64_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return dot_and_norms_of<Float16>(a, b, count);
    case DataType::kFloat32: return dot_and_norms_of<Float32>(a, b, count);
    case DataType::kFloat64: return dot_and_norms_of<Float64>(a, b, count);
    default: break;
  }
  HERD_ENFORCE(false && "Adasum takes float16, float32 and float64 only");
  return {};
}

void scaled_add(void* a, double a_coeff, const void* b, double b_coeff, int64_t count,
                DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return scaled_add_of<Float16>(a, a_coeff, b, b_coeff, count);
    case DataType::kFloat32: return scaled_add_of<Float32>(a, a_coeff, b, b_coeff, count);
    case DataType::kFloat64: return scaled_add_of<Float64>(a, a_coeff, b, b_coeff, count);
    default: break;
  }
  HERD_ENFORCE(false && "Adasum takes float16, float32 and float64 only");
}

}  // namespace herd::ops
