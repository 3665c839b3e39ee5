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

}  // namespace herd::ops
