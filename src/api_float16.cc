// The float16 conversions of include/herd/float16.h: herd's own (ops/half.h),
// so that a program's float16 data rounds as herd's reductions do.
#include "herd/float16.h"

#include "ops/half.h"

namespace herd {

void float_to_float16(const float* values, uint16_t* bits, int64_t count) {
  ops::float_to_float16(values, bits, count);
}

void float16_to_float(const uint16_t* bits, float* values, int64_t count) {
  ops::float16_to_float(bits, values, count);
}

}  // namespace herd
