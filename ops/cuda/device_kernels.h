// The GPU's side of ops/: scaling, averaging, identity fill, fp16 casts, and
// the batched copy that packs and unpacks a fusion buffer, on device memory.
//
// Called by the runtime's GPU executor (src/gpu/) on the background thread,
// with the buffers' device current. Each function only queues work on
// `stream` and returns at once; the Status reports a bad argument or a failed
// launch, and a fault inside a kernel shows at the stream's next event.
// Results equal the CPU functions of ops/reduce.h and ops/half.h element for
// element (same rounding, same integer rules), which tests/gpu checks. The
// one difference is a NaN's bits: GPU arithmetic returns the canonical NaN
// where the CPU returns an operand's NaN (payload and sign kept) or its own
// default one, so a floating scale or divide that yields NaN yields NaN on
// both, not always the same pattern. (The fp16 casts are pure bit
// manipulation and match NaNs bit for bit.)
//
// Arguments, alike for every function: a negative count, an unknown dtype
// or op, a divisor (or ranks) below 1, or a null pointer with a count above 0 returns
// an error Status naming the function and the values, and queues nothing;
// otherwise a count of 0 (or no tasks) queues nothing and returns ok.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "herd/types.h"

namespace herd::ops::cuda {

// One contiguous copy between two device buffers (of the same device).
struct CopyTask {
  const void* source = nullptr;
  void* destination = nullptr;
  std::size_t bytes = 0;
};

// Tasks one batched_copy launch carries. The batch travels by value as the
// kernel's parameter (28 bytes a task), which must stay within the 4 KiB
// that every CUDA version accepts. (CUDA 12.1 accepts up to 32 KiB, but a
// launch with such a parameter costs more than the launches it saves;
// docs/design/fusion.md has the measurement.)
inline constexpr int kCopyTasksPerLaunch = 128;

// All the copies in as few kernel launches as the tasks allow (a fixed
// number of tasks per launch, passed by value), instead of one cudaMemcpy
// each: a fusion buffer of hundreds of small gradients is packed in one or
// two launches. Tasks must not overlap one another. Tasks of 0 bytes are
// skipped; if a later launch fails, the earlier ones stay queued.
[[nodiscard]] Status batched_copy(const std::vector<CopyTask>& tasks, cudaStream_t stream);

// As ops::scale: data[i] *= factor, for every dtype (integers truncate and
// saturate as the CPU version does). factor == 1 queues nothing.
[[nodiscard]] Status scale(void* data, int64_t count, DataType dtype, double factor,
                           cudaStream_t stream);

// As ops::divide: data[i] / divisor (integers truncate toward zero).
[[nodiscard]] Status divide(void* data, int64_t count, DataType dtype, int64_t divisor,
                            cudaStream_t stream);

// As ops::average: the end of an average over `ranks` ranks with the
// postscale after it, data[i] / ranks * postscale, rounded once.
[[nodiscard]] Status average(void* data, int64_t count, DataType dtype, int64_t ranks,
                             double postscale, cudaStream_t stream);

// As ops::fill_identity: the identity of `op` (0 for sum, 1 for product, the
// type's largest value for min, ...), for a joined rank's contribution.
[[nodiscard]] Status fill_identity(void* data, int64_t count, DataType dtype, ReduceOp op,
                                   cudaStream_t stream);

// As ops::float_to_float16 / float16_to_float (round to nearest even).
[[nodiscard]] Status float_to_float16(const float* input, uint16_t* output, int64_t count,
                                      cudaStream_t stream);
[[nodiscard]] Status float16_to_float(const uint16_t* input, float* output, int64_t count,
                                      cudaStream_t stream);

}  // namespace herd::ops::cuda
