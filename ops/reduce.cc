// Element-wise reduction, scaling and division on host memory.
//
// Every public function first resolves (dtype, op) to one instantiated
// kernel, then runs it over the whole buffer; make_reduce_fn does that
// resolution once and hands the kernel to the collectives.
//
// Arithmetic rules, per element type:
//  - Integer sums and products wrap modulo 2^bits (two's complement for the
//    signed types). They run on the unsigned type of the same width, where
//    wrapping is defined, instead of relying on signed overflow.
//  - float32/float64 run in their own precision.
//  - float16/bfloat16 are widened to float32 one block at a time, reduced
//    there, and rounded back to nearest even once per element. For +, * and
//    the comparisons this is also the correctly rounded 16-bit result: a
//    float32 significand (24 bits) is at least twice a 16-bit one plus two,
//    so rounding first to float32 and then to 16 bits never double-rounds
//    differently from one direct rounding.
//  - Floating min/max return NaN when either input is NaN, so a NaN on any
//    rank reaches every rank instead of depending on which rank reduces
//    first. Which zero min(+0, -0) returns is unspecified.
//
// Buffers need not be aligned to their element type (a tensor may start at
// any byte, e.g. a NumPy view at an odd offset). The kernels read and write
// through typed pointers, which requires that alignment, so such a call runs
// its kernel on aligned staging blocks instead: memcpy in, kernel, memcpy out.
// Aligned buffers, the usual case, go straight to the kernel.
#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "common/enforce.h"
#include "ops/half_bits.h"

namespace herd::ops {
namespace {

// Elements per float32 staging block for the 16-bit types: two 4 KiB
// arrays, which stay in L1 next to the source and destination lines.
constexpr int kBlock = 1024;

using KernelFn = void (*)(void* dst, const void* a, const void* b, int64_t count);

// Calls body(begin, n, std::integral_constant<bool, full>{}) for each block
// of [0, count): kBlock elements at a time, then a shorter tail if any. The
// conversion loops of a full block then have a literal trip count, which is
// what lets the compiler vectorize them at -O2.
template <typename Body>
void for_each_block(int64_t count, Body&& body) {
  int64_t begin = 0;
  for (; count - begin >= kBlock; begin += kBlock) body(begin, int64_t{kBlock}, std::true_type{});
  if (begin < count) body(begin, count - begin, std::false_type{});
}

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Storage tags for the 16-bit float formats: elements are uint16_t bit
// patterns, converted through float32.
struct Float16Format {
  static float to_float(uint16_t bits) { return detail::float16_to_float_inline(bits); }
  static uint16_t from_float(float value) { return detail::float_to_float16_inline(value); }
};
struct BFloat16Format {
  static float to_float(uint16_t bits) { return detail::bfloat16_to_float_inline(bits); }
  static uint16_t from_float(float value) { return detail::float_to_bfloat16_inline(value); }
};

template <typename T>
constexpr bool kIsHalfFormat =
    std::is_same_v<T, Float16Format> || std::is_same_v<T, BFloat16Format>;

// The type sums and products of T are computed in: the unsigned type of the
// same width for integers (defined wraparound), T itself for floating point.
// Operands narrower than int promote to (signed) int: a uint8_t sum or
// product and a uint16_t sum fit, but 65535 * 65535 does not, so products of
// the narrow types are taken in unsigned int (ProductType) and truncated back,
// which keeps the same result modulo 2^bits.
template <typename T>
using WrapType = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                             std::common_type<T>>::type;
template <typename Wide>
using ProductType =
    std::conditional_t<std::is_integral_v<Wide> && sizeof(Wide) < sizeof(unsigned), unsigned, Wide>;

// dst = a <op> b for a native arithmetic type; dst may be a or b (each
// element is read before it is written). kAverage never reaches here; the
// dispatch folds it into kSum.
//
// Eigen vectorizes the float and double paths and int32 min/max. It has no
// SSE packets for the unsigned types used for wrapping sums, nor for 8-, 16-
// and 64-bit integers, so those run as plain loops; integer reductions are rare
// in training traffic and correctness without UB comes first.
template <ReduceOp kOp, typename T>
void reduce_array(T* dst, const T* a, const T* b, int64_t count) {
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kProduct) {
    using Wide = WrapType<T>;
    // Viewing a signed integer through its unsigned counterpart is one of
    // the accesses the aliasing rules allow.
    ArrayMap<Wide> d(reinterpret_cast<Wide*>(dst), count);
    ConstArrayMap<Wide> x(reinterpret_cast<const Wide*>(a), count);
    ConstArrayMap<Wide> y(reinterpret_cast<const Wide*>(b), count);
    if constexpr (kOp == ReduceOp::kSum) {
      d = x + y;
    } else if constexpr (std::is_same_v<ProductType<Wide>, Wide>) {
      d = x * y;
    } else {
      using Product = ProductType<Wide>;
      d = (x.template cast<Product>() * y.template cast<Product>()).template cast<Wide>();
    }
  } else {
    static_assert(kOp == ReduceOp::kMin || kOp == ReduceOp::kMax);
    ArrayMap<T> d(dst, count);
    ConstArrayMap<T> x(a, count);
    ConstArrayMap<T> y(b, count);
    // Eigen's default min/max leave NaN handling to the instruction set;
    // floating types ask for NaN propagation explicitly (see top of file).
    // Eigen 3.4 exposes that choice only through these functors, not
    // through ArrayBase::min/max.
    constexpr int kNaN = std::is_floating_point_v<T> ? Eigen::PropagateNaN : Eigen::PropagateFast;
    if constexpr (kOp == ReduceOp::kMin) {
      d = x.binaryExpr(y, Eigen::internal::scalar_min_op<T, T, kNaN>());
    } else {
      d = x.binaryExpr(y, Eigen::internal::scalar_max_op<T, T, kNaN>());
    }
  }
}

// The 16-bit path: widen a block of each operand, reduce in float32 with the
// same Eigen kernel, round the block back. dst may be a or b because both
// blocks are read before any element is written.
template <ReduceOp kOp, typename Format>
void reduce_half_array(uint16_t* dst, const uint16_t* a, const uint16_t* b, int64_t count) {
  alignas(64) float a_block[kBlock];
  alignas(64) float b_block[kBlock];
  for_each_block(count, [&](int64_t begin, int64_t count_in_block, auto full) {
    const int64_t n = decltype(full)::value ? kBlock : count_in_block;
    for (int64_t i = 0; i < n; ++i) {
      a_block[i] = Format::to_float(a[begin + i]);
      b_block[i] = Format::to_float(b[begin + i]);
    }
    reduce_array<kOp, float>(a_block, a_block, b_block, n);
    for (int64_t i = 0; i < n; ++i) dst[begin + i] = Format::from_float(a_block[i]);
  });
}

template <ReduceOp kOp, typename Element>
void reduce_kernel(void* dst, const void* a, const void* b, int64_t count) {
  if constexpr (kIsHalfFormat<Element>) {
    reduce_half_array<kOp, Element>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                    static_cast<const uint16_t*>(b), count);
  } else {
    reduce_array<kOp, Element>(static_cast<Element*>(dst), static_cast<const Element*>(a),
                               static_cast<const Element*>(b), count);
  }
}

template <typename Element>
KernelFn select_for_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return &reduce_kernel<ReduceOp::kSum, Element>;
    case ReduceOp::kMin: return &reduce_kernel<ReduceOp::kMin, Element>;
    case ReduceOp::kMax: return &reduce_kernel<ReduceOp::kMax, Element>;
    case ReduceOp::kProduct: return &reduce_kernel<ReduceOp::kProduct, Element>;
    case ReduceOp::kAdasum: break;  // not element-wise: collectives/adasum.h
  }
  herd::detail::throw_internal_error(__FILE__, __LINE__, "unknown ReduceOp " + to_string(op));
}

KernelFn select_kernel(DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8: return select_for_op<uint8_t>(op);
    case DataType::kInt8: return select_for_op<int8_t>(op);
    case DataType::kInt16: return select_for_op<int16_t>(op);
    case DataType::kInt32: return select_for_op<int32_t>(op);
    case DataType::kInt64: return select_for_op<int64_t>(op);
    case DataType::kFloat16: return select_for_op<Float16Format>(op);
    case DataType::kBFloat16: return select_for_op<BFloat16Format>(op);
    case DataType::kFloat32: return select_for_op<float>(op);
    case DataType::kFloat64: return select_for_op<double>(op);
  }
  herd::detail::throw_internal_error(__FILE__, __LINE__, "unknown DataType " + to_string(dtype));
}

template <typename Format>
void scale_half(uint16_t* buf, int64_t count, float factor) {
  alignas(64) float block[kBlock];
  for_each_block(count, [&](int64_t begin, int64_t count_in_block, auto full) {
    const int64_t n = decltype(full)::value ? kBlock : count_in_block;
    for (int64_t i = 0; i < n; ++i) block[i] = Format::to_float(buf[begin + i]);
    ArrayMap<float>(block, n) *= factor;
    for (int64_t i = 0; i < n; ++i) buf[begin + i] = Format::from_float(block[i]);
  });
}

// Integers scale in double and convert back truncating toward zero, as a
// C++ conversion from double does (Horovod's integer scaling). What such a conversion leaves
// undefined is defined here: a product beyond the type's range saturates at its limit (the bounds
// are compared in double, before converting), and a NaN product (a NaN factor, or 0 times an
// infinite one) becomes 0.
template <typename T>
void scale_integer(T* buf, int64_t count, double factor) {
  // A truncated product lies in range exactly when the product lies
  // strictly between min() - 1 and max() + 1. Both bounds are exact in
  // double up to int32; for int64 they round to -2^63 and 2^63, which
  // changes nothing, as no double lies strictly between -2^63 - 1 and -2^63.
  const double below_lowest = static_cast<double>(std::numeric_limits<T>::min()) - 1.0;
  const double above_highest = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  for (int64_t i = 0; i < count; ++i) {
    const double product = static_cast<double>(buf[i]) * factor;
    T result;
    if (std::isnan(product)) {
      result = 0;
    } else if (product <= below_lowest) {
      result = std::numeric_limits<T>::min();
    } else if (product >= above_highest) {
      result = std::numeric_limits<T>::max();
    } else {
      result = static_cast<T>(product);
    }
    buf[i] = result;
  }
}

// C++ integer division truncates toward zero, which is the documented
// average. Every herd integer type widens exactly to int64_t, and the
// quotient's magnitude is at most the dividend's, so narrowing back is exact;
// a divisor larger than the type's range simply yields 0.
template <typename T>
void divide_integer(T* buf, int64_t count, int64_t divisor) {
  for (int64_t i = 0; i < count; ++i) {
    buf[i] = static_cast<T>(static_cast<int64_t>(buf[i]) / divisor);
  }
}

bool is_integer_type(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64: return true;
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64: return false;
  }
  herd::detail::throw_internal_error(__FILE__, __LINE__, "unknown DataType " + to_string(dtype));
}

// Bytes per staging block: small enough for the stack and L1, large enough
// that the kernel's per-call cost is spread over many elements.
constexpr std::size_t kStagingBytes = 8192;

// Every herd element type is aligned to its size.
bool aligned(const void* p, std::size_t element_bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % element_bytes == 0;
}

// kernel(dst, a, b, count) over aligned copies of a and b, a block at a
// time. dst may be a or b: both blocks are copied in before dst's block is
// written.
void reduce_staged(KernelFn kernel, std::size_t element_bytes, void* dst, const void* a,
                   const void* b, int64_t count) {
  alignas(64) unsigned char a_block[kStagingBytes];
  alignas(64) unsigned char b_block[kStagingBytes];
  const auto per_block = static_cast<int64_t>(kStagingBytes / element_bytes);
  for (int64_t begin = 0; begin < count; begin += per_block) {
    const int64_t n = std::min(per_block, count - begin);
    const std::size_t offset = static_cast<std::size_t>(begin) * element_bytes;
    const std::size_t bytes = static_cast<std::size_t>(n) * element_bytes;
    std::memcpy(a_block, static_cast<const unsigned char*>(a) + offset, bytes);
    std::memcpy(b_block, static_cast<const unsigned char*>(b) + offset, bytes);
    kernel(a_block, a_block, b_block, n);
    std::memcpy(static_cast<unsigned char*>(dst) + offset, a_block, bytes);
  }
}

void reduce(KernelFn kernel, std::size_t element_bytes, void* dst, const void* a, const void* b,
            int64_t count) {
  if (aligned(dst, element_bytes) && aligned(a, element_bytes) && aligned(b, element_bytes)) {
    kernel(dst, a, b, count);
  } else {
    reduce_staged(kernel, element_bytes, dst, a, b, count);
  }
}

// in_place(block, n) on aligned copies of buf, a block at a time.
template <typename InPlace>
void in_place_staged(void* buf, int64_t count, std::size_t element_bytes, InPlace in_place) {
  alignas(64) unsigned char block[kStagingBytes];
  const auto per_block = static_cast<int64_t>(kStagingBytes / element_bytes);
  for (int64_t begin = 0; begin < count; begin += per_block) {
    const int64_t n = std::min(per_block, count - begin);
    unsigned char* at =
        static_cast<unsigned char*>(buf) + static_cast<std::size_t>(begin) * element_bytes;
    const std::size_t bytes = static_cast<std::size_t>(n) * element_bytes;
    std::memcpy(block, at, bytes);
    in_place(block, n);
    std::memcpy(at, block, bytes);
  }
}

}  // namespace

void reduce_into(void* dst, const void* src, int64_t count, DataType dtype, ReduceOp op) {
  HERD_ENFORCE_GE(count, 0);
  if (count == 0) return;
  reduce(select_kernel(dtype, op), element_size(dtype), dst, dst, src, count);
}

ReduceFn make_reduce_fn(DataType dtype, ReduceOp op) {
  const KernelFn kernel = select_kernel(dtype, op);
  const std::size_t element_bytes = element_size(dtype);
  return [kernel, element_bytes](void* dst, const void* a, const void* b, int64_t count) {
    HERD_ENFORCE_GE(count, 0);
    if (count == 0) return;
    reduce(kernel, element_bytes, dst, a, b, count);
  };
}

void scale(void* buf, int64_t count, DataType dtype, double factor) {
  HERD_ENFORCE_GE(count, 0);
  if (factor == 1.0 || count == 0) return;
  if (!aligned(buf, element_size(dtype))) {
    in_place_staged(buf, count, element_size(dtype),
                    [&](void* block, int64_t n) { scale(block, n, dtype, factor); });
    return;
  }
  switch (dtype) {
    case DataType::kUInt8: return scale_integer(static_cast<uint8_t*>(buf), count, factor);
    case DataType::kInt8: return scale_integer(static_cast<int8_t*>(buf), count, factor);
    case DataType::kInt16: return scale_integer(static_cast<int16_t*>(buf), count, factor);
    case DataType::kInt32: return scale_integer(static_cast<int32_t*>(buf), count, factor);
    case DataType::kInt64: return scale_integer(static_cast<int64_t*>(buf), count, factor);
    case DataType::kFloat16:
      return scale_half<Float16Format>(static_cast<uint16_t*>(buf), count,
                                       static_cast<float>(factor));
    case DataType::kBFloat16:
      return scale_half<BFloat16Format>(static_cast<uint16_t*>(buf), count,
                                        static_cast<float>(factor));
    case DataType::kFloat32:
      ArrayMap<float>(static_cast<float*>(buf), count) *= static_cast<float>(factor);
      return;
    case DataType::kFloat64: ArrayMap<double>(static_cast<double*>(buf), count) *= factor; return;
  }
  herd::detail::throw_internal_error(__FILE__, __LINE__, "unknown DataType " + to_string(dtype));
}

void divide(void* buf, int64_t count, DataType dtype, int64_t divisor) {
  HERD_ENFORCE_GE(divisor, 1);
  HERD_ENFORCE_GE(count, 0);
  if (divisor == 1 || count == 0) return;
  if (!aligned(buf, element_size(dtype))) {
    in_place_staged(buf, count, element_size(dtype),
                    [&](void* block, int64_t n) { divide(block, n, dtype, divisor); });
    return;
  }
  switch (dtype) {
    case DataType::kUInt8: return divide_integer(static_cast<uint8_t*>(buf), count, divisor);
    case DataType::kInt8: return divide_integer(static_cast<int8_t*>(buf), count, divisor);
    case DataType::kInt16: return divide_integer(static_cast<int16_t*>(buf), count, divisor);
    case DataType::kInt32: return divide_integer(static_cast<int32_t*>(buf), count, divisor);
    case DataType::kInt64: return divide_integer(static_cast<int64_t*>(buf), count, divisor);
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      // Multiplying by the reciprocal is the documented contract; scale()
      // applies it in each type's precision (float32 for the 16-bit types).
      return scale(buf, count, dtype, 1.0 / static_cast<double>(divisor));
  }
  herd::detail::throw_internal_error(__FILE__, __LINE__, "unknown DataType " + to_string(dtype));
}

void average(void* buf, int64_t count, DataType dtype, int64_t ranks, double postscale) {
  HERD_ENFORCE_GE(ranks, 1);
  if (is_integer_type(dtype) && postscale == 1.0) return divide(buf, count, dtype, ranks);
  scale(buf, count, dtype, postscale / static_cast<double>(ranks));
}

}  // namespace herd::ops
