// The two element-wise kernels of the Adasum reduction (collectives/adasum.h)
// on host memory: the dot product and squared norms of two vectors, and the
// linear combination that replaces one vector by the Adasum of the pair.
//
// float16, float32 and float64 only (the dtypes Adasum accepts); every
// product and sum is computed in double, whatever the element type. Buffers
// need not be aligned to their element type. Pure functions of their
// arguments, safe from any thread.
#pragma once

#include <cstdint>

#include "herd/types.h"

namespace herd::ops {

// True for the element types the kernels below take.
bool adasum_supports(DataType dtype);

// Sums over [0, count), in double.
struct DotAndNorms {
  double dot = 0.0;      // sum of a[i] * b[i]
  double a_norm2 = 0.0;  // sum of a[i]^2
  double b_norm2 = 0.0;  // sum of b[i]^2
};
DotAndNorms dot_and_norms(const void* a, const void* b, int64_t count, DataType dtype);

// a[i] = a_coeff * a[i] + b_coeff * b[i] for i in [0, count), computed in
// double and rounded once to float32 or float64 (float16: rounded to float32,
// then to nearest even float16). a and b must not overlap.
void scaled_add(void* a, double a_coeff, const void* b, double b_coeff, int64_t count,
                DataType dtype);

}  // namespace herd::ops
