// Conversions between float32 and the 16-bit float formats, bit-exact with
// IEEE-754 binary16 and bfloat16 (round to nearest even, NaN kept NaN).
//
// Used by ops/reduce.cc and by tests that build reference values; pure
// functions, safe from any thread.
#pragma once

#include <cstdint>

namespace herd::ops {

float float16_to_float(uint16_t bits);
uint16_t float_to_float16(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);

// The same over `count` elements: one call per array rather than per element
// (as a per-element call into this file costs more than the conversion).
void float_to_float16(const float* values, uint16_t* bits, int64_t count);
void float16_to_float(const uint16_t* bits, float* values, int64_t count);

}  // namespace herd::ops
