// Inline bodies of the float16/bfloat16 conversions declared in ops/half.h.
//
// Internal to ops/: reduce.cc converts every element of a 16-bit buffer on
// its hot path, and a call into another translation unit per element would
// cost more than the conversion itself. Everyone else includes ops/half.h,
// whose out-of-line functions forward here. Pure functions, any thread.
// The kernels of ops/cuda/device_kernels.cu call the same functions on the
// GPU (HERD_HOST_DEVICE, ops/host_device.h), so that both sides round alike
// by construction; for the plain C++ compiler the macro is empty.
//
// The conversions are written without branches: every case (normal,
// subnormal, infinity, NaN) is computed for every input and the right one is
// picked with bit masks. That lets the compiler turn a loop of conversions
// into SIMD code even at -O2, where data-dependent branches (or ternaries it
// would lower to branches) keep a loop scalar. The few floating-point
// operations used are exact, so the results do not depend on the current
// rounding mode or on flush-to-zero / denormals-are-zero settings.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/host_device.h"

namespace herd::ops::detail {

HERD_HOST_DEVICE inline uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

HERD_HOST_DEVICE inline float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

// All ones when `condition` holds, else zero.
HERD_HOST_DEVICE inline uint32_t mask_if(bool condition) {
  return 0u - static_cast<uint32_t>(condition);
}

// `if_set` where `mask` is all ones, `otherwise` where it is zero.
HERD_HOST_DEVICE inline uint32_t select_bits(uint32_t mask, uint32_t if_set, uint32_t otherwise) {
  return (if_set & mask) | (otherwise & ~mask);
}

// float32 fields: 1 sign, 8 exponent (bias 127), 23 mantissa.
// binary16 fields: 1 sign, 5 exponent (bias 15), 10 mantissa.
// bfloat16 is the top half of a float32: 1 sign, 8 exponent, 7 mantissa.
constexpr uint32_t kFloatQuietBit = 0x00400000u;
constexpr uint32_t kFloatInfinity = 0x7f800000u;
constexpr uint32_t kHalfQuietBit = 0x0200u;
constexpr uint32_t kHalfInfinity = 0x7c00u;
constexpr uint32_t kBFloatQuietBit = 0x0040u;
// Rebias a binary16 exponent to float32: 127 - 15, in exponent position.
constexpr uint32_t kRebias = 112u << 23;
// Smallest normal binary16, 2^-14, as float32 bits.
constexpr uint32_t kHalfMinNormalAsFloat = 0x38800000u;
// 65520: the midpoint between the largest finite binary16 (65504) and 2^16.
// Its tie goes to the even neighbour, infinity, so it is where overflow starts.
constexpr uint32_t kHalfOverflowAsFloat = 0x477ff000u;

HERD_HOST_DEVICE inline float float16_to_float_inline(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t magnitude = half & 0x7fffu;  // exponent and mantissa

  // Normal: same mantissa, exponent rebiased.
  const uint32_t normal = (magnitude << 13) + kRebias;
  // Subnormal (and zero): the value is magnitude * 2^-24, a normal float32.
  // Both the integer conversion and the power-of-two scaling are exact.
  const uint32_t subnormal =
      float_bits(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f);
  // Infinity keeps a zero mantissa; a NaN keeps its payload and is made
  // quiet, as IEEE-754 conversions do.
  const uint32_t special =
      (magnitude << 13) | kFloatInfinity | (mask_if(magnitude > kHalfInfinity) & kFloatQuietBit);

  uint32_t result = select_bits(mask_if(magnitude < 0x0400u), subnormal, normal);
  result = select_bits(mask_if(magnitude >= kHalfInfinity), special, result);
  return bits_float(sign | result);
}

HERD_HOST_DEVICE inline uint16_t float_to_float16_inline(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  // Magnitudes fit in 31 bits, so they compare as signed integers, which
  // SSE2 does in one instruction (unsigned compares need two more).
  const auto magnitude = static_cast<int32_t>(bits & 0x7fffffffu);

  // Normal result: adding 0xfff plus the lowest kept bit rounds the 13
  // dropped bits to nearest, ties to even; a carry out of the mantissa
  // correctly bumps the exponent. Only meaningful for magnitudes in
  // [2^-14, 65520).
  const auto wide = static_cast<uint32_t>(magnitude);
  const uint32_t normal = ((wide + 0xfffu + ((wide >> 13) & 1u)) >> 13) - (kRebias >> 13);

  // Subnormal result (|value| < 2^-14): the encoding is |value| in units of
  // 2^-24, rounded to nearest even; 1024 units is the smallest normal, whose
  // encoding is also 1024, so rounding up across the boundary needs no fixup.
  // Other lanes are zeroed first so the float-to-int conversion stays in
  // range. units < 1024, so the scaling, the truncation and the subtraction
  // are all exact (and fusing the scaling and the subtraction into one
  // multiply-add, as nvcc does by default, cannot change the result).
  const uint32_t tiny = wide & mask_if(magnitude < static_cast<int32_t>(kHalfMinNormalAsFloat));
  const float units = bits_float(tiny) * 0x1p24f;
  const auto whole = static_cast<int32_t>(units);
  // The dropped fraction is a non-negative float, so its bits order like its
  // value. Adding the parity of `whole` turns "fraction > 0.5, or exactly 0.5
  // and whole is odd" into one comparison with the bits of 0.5f.
  const auto fraction = static_cast<int32_t>(float_bits(units - static_cast<float>(whole)));
  const bool round_up = fraction + (whole & 1) > 0x3f000000;
  const uint32_t subnormal = static_cast<uint32_t>(whole) - mask_if(round_up);

  // NaN: keep the top payload bits and force the quiet bit, so that a NaN
  // whose payload lives only in the dropped low bits does not become inf.
  const uint32_t nan = kHalfInfinity | kHalfQuietBit | ((wide >> 13) & 0x3ffu);

  uint32_t result = select_bits(mask_if(magnitude >= static_cast<int32_t>(kHalfMinNormalAsFloat)),
                                normal, subnormal);
  result = select_bits(mask_if(magnitude >= static_cast<int32_t>(kHalfOverflowAsFloat)),
                       kHalfInfinity, result);
  result = select_bits(mask_if(magnitude > static_cast<int32_t>(kFloatInfinity)), nan, result);
  return static_cast<uint16_t>(sign | result);
}

HERD_HOST_DEVICE inline float bfloat16_to_float_inline(uint16_t bfloat) {
  const uint32_t bits = static_cast<uint32_t>(bfloat) << 16;
  const uint32_t quiet = mask_if((bits & 0x7fffffffu) > kFloatInfinity) & kFloatQuietBit;
  return bits_float(bits | quiet);
}

HERD_HOST_DEVICE inline uint16_t float_to_bfloat16_inline(float value) {
  const uint32_t bits = float_bits(value);
  // Round the dropped 16 bits to nearest, ties to even. Overflow carries into
  // the exponent and ends at infinity (0x7f80), which is the right answer;
  // infinity itself has zero low bits and stays put. (For NaN inputs the sum
  // may wrap; that lane is replaced below.)
  const uint32_t lowest_kept = (bits >> 16) & 1u;
  const uint32_t rounded = (bits + 0x7fffu + lowest_kept) >> 16;
  const uint32_t nan = (bits >> 16) | kBFloatQuietBit;
  return static_cast<uint16_t>(
      select_bits(mask_if((bits & 0x7fffffffu) > kFloatInfinity), nan, rounded));
}

}  // namespace herd::ops::detail
