// Out-of-line entry points for the 16-bit float conversions; the bodies live
// in ops/half_bits.h so that reduce.cc can inline them into its loops.
#include "ops/half.h"

#include "ops/half_bits.h"

namespace herd::ops {

float float16_to_float(uint16_t bits) { return detail::float16_to_float_inline(bits); }

uint16_t float_to_float16(float value) { return detail::float_to_float16_inline(value); }

float bfloat16_to_float(uint16_t bits) { return detail::bfloat16_to_float_inline(bits); }

uint16_t float_to_bfloat16(float value) { return detail::float_to_bfloat16_inline(value); }

}  // namespace herd::ops
