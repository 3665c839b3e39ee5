// Element-wise reduction and scaling kernels on host memory (Eigen).
//
// Called by the collectives (reduce_into, through a ReduceFn) and by the
// runtime (scale, average) on the background thread; pure functions of their
// arguments, safe from any thread. float16 and bfloat16 are computed in
// float32 and rounded back to nearest-even after each call. Buffers may start
// at any byte address; those aligned to their element type take the fast
// path, the others go through aligned copies a block at a time.
#pragma once

#include <cstdint>
#include <functional>

#include "herd/types.h"

namespace herd::ops {

// dst[i] = dst[i] <op> src[i] for i in [0, count). kAverage reduces as kSum:
// the division by the number of ranks is the caller's (see average()).
// dst and src must not overlap unless they are equal.
void reduce_into(void* dst, const void* src, int64_t count, DataType dtype, ReduceOp op);

// buf[i] = buf[i] * factor. Floating types multiply in their own precision
// (float16/bfloat16 through float32, the factor rounded to float32 first);
// integer types multiply in double and truncate toward zero (7 * 0.5 gives
// 3, -7 * 0.5 gives -3), saturating at the type's limits where the product
// leaves its range; a NaN product gives 0. A factor of exactly 1.0 returns
// without touching memory.
void scale(void* buf, int64_t count, DataType dtype, double factor);

// buf[i] = buf[i] / divisor. Floating types multiply by 1/divisor; integer
// types use integer division, which truncates toward zero (sum 7 over 2
// ranks averages to 3, sum -7 to -3). divisor must be >= 1.
void divide(void* buf, int64_t count, DataType dtype, int64_t divisor);

// The end of an average over `ranks` ranks and the postscale after it, as
// one step: buf[i] = buf[i] / ranks * postscale. Integer types with a
// postscale of 1 divide exactly (divide()); otherwise buf is scaled once by
// postscale / ranks, taken in double (scale(): integers truncate, floating
// types multiply in their own precision), so that the result is rounded
// once. ranks must be >= 1.
void average(void* buf, int64_t count, DataType dtype, int64_t ranks, double postscale);

// Fills buf with the identity of `op` (sum, average and adasum 0, product 1, min the
// type's largest value or +infinity, max its lowest or -infinity), so that
// reducing it into anything leaves that unchanged.
void fill_identity(void* buf, int64_t count, DataType dtype, ReduceOp op);

// The reduction the collectives apply to one received segment:
// dst[i] = a[i] <op> b[i]. dst may be a or b but must not otherwise overlap
// them. Three operands rather than dst op= src because an out-of-place
// allreduce would otherwise first copy its input to the output and then
// reduce there: for segments beyond the cache that copy costs a whole extra
// pass over memory (docs/design/ring-allreduce.md).
using ReduceFn = std::function<void(void* dst, const void* a, const void* b, int64_t count)>;

// reduce_into's kernel bound to one dtype and op, in the three-operand form.
ReduceFn make_reduce_fn(DataType dtype, ReduceOp op);

}  // namespace herd::ops
