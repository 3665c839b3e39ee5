// acc += value on a GPU (kvstore/gpu/add_kernel.h): one grid-stride kernel per
// dtype, each addition written with an explicit rounding intrinsic so that
// nvcc cannot contract it with anything, which keeps the GPU's sum bitwise the
// CPU's.
#include "kvstore/gpu/add_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

namespace herd {
namespace kv {
namespace detail {
namespace {

constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill a Hopper GPU; larger arrays loop inside the grid.
constexpr int64_t kMaxBlocks = 1024;

struct AddFloat {
  __device__ static float add(float a, float b) { return __fadd_rn(a, b); }
};
struct AddDouble {
  __device__ static double add(double a, double b) { return __dadd_rn(a, b); }
};
struct AddFloat16 {
  __device__ static uint16_t add(uint16_t a, uint16_t b) {
    const float sum =
        __fadd_rn(__half2float(__ushort_as_half(a)), __half2float(__ushort_as_half(b)));
    return __half_as_ushort(__float2half_rn(sum));
  }
};
struct AddBFloat16 {
  __device__ static uint16_t add(uint16_t a, uint16_t b) {
    const float sum = __fadd_rn(__bfloat162float(__ushort_as_bfloat16(a)),
                                __bfloat162float(__ushort_as_bfloat16(b)));
    return __bfloat16_as_ushort(__float2bfloat16_rn(sum));
  }
};
// Unsigned arithmetic wraps where a signed overflow would be undefined.
template <typename T>
struct AddInteger {
  __device__ static T add(T a, T b) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};

template <typename Op, typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    add_kernel(T* acc, const T* value, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    acc[i] = Op::add(acc[i], value[i]);
  }
}

template <typename Op, typename T>
cudaError_t launch(void* acc, const void* value, int64_t count, cudaStream_t stream) {
  const int64_t wanted = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const int blocks = static_cast<int>(std::clamp<int64_t>(wanted, 1, kMaxBlocks));
  add_kernel<Op, T><<<blocks, kThreadsPerBlock, 0, stream>>>(static_cast<T*>(acc),
                                                             static_cast<const T*>(value), count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t add_into_async(DataType dtype, void* acc, const void* value, int64_t count,
                           cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (dtype) {
    case DataType::kUInt8: return launch<AddInteger<uint8_t>, uint8_t>(acc, value, count, stream);
    case DataType::kInt8: return launch<AddInteger<int8_t>, int8_t>(acc, value, count, stream);
    case DataType::kInt16: return launch<AddInteger<int16_t>, int16_t>(acc, value, count, stream);
    case DataType::kInt32: return launch<AddInteger<int32_t>, int32_t>(acc, value, count, stream);
    case DataType::kInt64: return launch<AddInteger<int64_t>, int64_t>(acc, value, count, stream);
    case DataType::kFloat32: return launch<AddFloat, float>(acc, value, count, stream);
    case DataType::kFloat64: return launch<AddDouble, double>(acc, value, count, stream);
    case DataType::kFloat16: return launch<AddFloat16, uint16_t>(acc, value, count, stream);
    case DataType::kBFloat16: return launch<AddBFloat16, uint16_t>(acc, value, count, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
