// The identity element of each reduction, written into memory. A rank that
// has called herd::join contributes it to the allreduces of the ranks still
// running, so that its share changes nothing.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/enforce.h"
#include "ops/reduce.h"

namespace herd::ops {
namespace {

// IEEE binary16 and bfloat16 bit patterns.
constexpr uint16_t kHalfZero = 0x0000;
constexpr uint16_t kHalfOne = 0x3C00;
constexpr uint16_t kHalfPlusInfinity = 0x7C00;
constexpr uint16_t kHalfMinusInfinity = 0xFC00;
constexpr uint16_t kBFloatZero = 0x0000;
constexpr uint16_t kBFloatOne = 0x3F80;
constexpr uint16_t kBFloatPlusInfinity = 0x7F80;
constexpr uint16_t kBFloatMinusInfinity = 0xFF80;

template <typename T>
T identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum: return T{0};
    case ReduceOp::kProduct: return T{1};
    case ReduceOp::kMin:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    case ReduceOp::kMax:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
  }
  HERD_ENFORCE(false && "unknown ReduceOp");
}

uint16_t sixteen_bit_identity(ReduceOp op, uint16_t zero, uint16_t one, uint16_t plus_infinity,
                              uint16_t minus_infinity) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum: return zero;
    case ReduceOp::kProduct: return one;
    case ReduceOp::kMin: return plus_infinity;
    case ReduceOp::kMax: return minus_infinity;
  }
  HERD_ENFORCE(false && "unknown ReduceOp");
}

// buf may start at any byte (ops/reduce.h); typed stores need T's alignment.
template <typename T>
void fill(void* buf, int64_t count, T value) {
  if (reinterpret_cast<std::uintptr_t>(buf) % alignof(T) == 0) {
    std::fill_n(static_cast<T*>(buf), count, value);
    return;
  }
  auto* bytes = static_cast<unsigned char*>(buf);
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(bytes + static_cast<std::size_t>(i) * sizeof(T), &value, sizeof(T));
  }
}

}  // namespace

void fill_identity(void* buf, int64_t count, DataType dtype, ReduceOp op) {
  HERD_ENFORCE_GE(count, 0);
  switch (dtype) {
    case DataType::kUInt8: return fill(buf, count, identity_of<uint8_t>(op));
    case DataType::kInt8: return fill(buf, count, identity_of<int8_t>(op));
    case DataType::kInt16: return fill(buf, count, identity_of<int16_t>(op));
    case DataType::kInt32: return fill(buf, count, identity_of<int32_t>(op));
    case DataType::kInt64: return fill(buf, count, identity_of<int64_t>(op));
    case DataType::kFloat32: return fill(buf, count, identity_of<float>(op));
    case DataType::kFloat64: return fill(buf, count, identity_of<double>(op));
    case DataType::kFloat16:
      return fill(
          buf, count,
          sixteen_bit_identity(op, kHalfZero, kHalfOne, kHalfPlusInfinity, kHalfMinusInfinity));
    case DataType::kBFloat16:
      return fill(buf, count,
                  sixteen_bit_identity(op, kBFloatZero, kBFloatOne, kBFloatPlusInfinity,
                                       kBFloatMinusInfinity));
  }
  HERD_ENFORCE(false && "unknown DataType");
}

}  // namespace herd::ops
