// Out-of-line entry points for the 16-bit float conversions; the bodies live
// in ops/half_bits.h so that reduce.cc can inline them into its loops.
#include "ops/half.h"

#include "ops/half_bits.h"

namespace herd::ops {

float float16_to_float(uint16_t bits) { return detail::float16_to_float_inline(bits); }

uint16_t float_to_float16(float value) { return detail::float_to_float16_inline(value); }

float bfloat16_to_float(uint16_t bits) { return detail::bfloat16_to_float_inline(bits); }

uint16_t float_to_bfloat16(float value) { return detail::float_to_bfloat16_inline(value); }

void float_to_float16(const float* values, uint16_t* bits, int64_t count) {
  for (int64_t i = 0; i < count; ++i) bits[i] = detail::float_to_float16_inline(values[i]);
}

void float16_to_float(const uint16_t* bits, float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) values[i] = detail::float16_to_float_inline(bits[i]);
}

}  // namespace herd::ops
