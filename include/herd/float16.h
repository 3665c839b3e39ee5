// Conversions between float32 and IEEE-754 binary16 (DataType::kFloat16)
// over arrays: round to nearest even, overflow to infinity, NaN kept NaN.
//
// The same conversions herd applies when it reduces float16 tensors, so a
// program that prepares or reads float16 buffers (DistributedOptimizer's
// Compression::kFP16, for one) rounds exactly as herd does. Pure functions,
// safe from any thread, callable before herd::init.
#pragma once

#include <cstdint>

namespace herd {

// bits[i] = the float16 nearest to values[i], for i in [0, count).
void float_to_float16(const float* values, uint16_t* bits, int64_t count);

// values[i] = the float16 bits[i] as float32 (exact), for i in [0, count).
void float16_to_float(const uint16_t* bits, float* values, int64_t count);

}  // namespace herd
