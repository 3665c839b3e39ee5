// The device types' sum on a GPU (kvstore/gpu_merge.h): acc += value,
// elementwise, queued on a stream of the buffers' GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "herd/types.h"

namespace herd {
namespace kv {
namespace detail {

// acc[i] = acc[i] + value[i] for i in [0, count), in `dtype`, rounded as the
// CPU's sum_values (kvstore/merge.cc) rounds: float32 and float64 add once
// (never fused), float16 and bfloat16 widen to float32, add and round to
// nearest even, integers wrap. A NaN sum is a NaN (its bits may differ from
// the CPU's). Returns the launch's error; a fault inside the kernel shows at
// the stream's next synchronization.
cudaError_t add_into_async(DataType dtype, void* acc, const void* value, int64_t count,
                           cudaStream_t stream);

}  // namespace detail
}  // namespace kv
}  // namespace herd
