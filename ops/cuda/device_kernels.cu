// ops/cuda/device_kernels.h on the GPU: the kernels that scale, average,
// fill and convert device buffers, and the batched copy that packs and
// unpacks a fusion buffer, each queued on the caller's stream.
//
// Equality with the CPU (ops/reduce.cc, ops/identity.cc, ops/half.cc) is the
// point of every choice below, rather than speed at any price:
//  - The 16-bit float conversions are the CPU's own functions
//    (ops/half_bits.h, compiled for both sides), not CUDA's __half
//    intrinsics, so NaN quieting and rounding cannot differ.
//  - Products are written __fmul_rn / __dmul_rn: by default nvcc may fuse a
//    multiply with an add that follows it (round() adds 0.5 inside) into
//    one FMA, which skips the product's rounding; the CPU rounds every
//    product.
//  - Integer scaling keeps the CPU's order: multiply in double, round half
//    away from zero, compare the bounds in double, then convert. The bounds
//    are computed on the host by the very expressions ops/reduce.cc uses.
//  - fill_identity asks the CPU function for the one element it writes.
//
// Elementwise kernels walk [0, count) with a grid-stride loop over a grid of
// at most kMaxBlocks blocks: int64 indices throughout, so any count fits
// without a 32-bit index wrapping, and the grid stays the size that fills
// the chip whatever the count.
#include "ops/cuda/device_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "common/cuda/cuda_check.h"
#include "common/enforce.h"
#include "ops/half_bits.h"
#include "ops/reduce.h"

namespace herd::ops::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
// An H200 keeps 132 SMs x 8 blocks of 256 threads resident, about 1056: a
// grid of 1024 covers the chip, and a larger one would only queue more
// blocks behind them.
constexpr int64_t kMaxBlocks = 1024;
// The vector width of the copy (uint4).
constexpr std::uintptr_t kVectorBytes = 16;

int64_t ceil_div(int64_t items, int64_t per) { return items / per + (items % per != 0 ? 1 : 0); }

int blocks_for(int64_t items) {
  return static_cast<int>(std::clamp<int64_t>(ceil_div(items, kThreadsPerBlock), 1, kMaxBlocks));
}

__device__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---------------------------------------------------------------------------
// Elementwise kernels.

__device__ float multiply_unfused(float a, float b) { return __fmul_rn(a, b); }
__device__ double multiply_unfused(double a, double b) { return __dmul_rn(a, b); }

// float32 and float64: one rounded multiply, as Eigen's `*=` on the CPU.
template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scale_floating_kernel(T* data, int64_t count, T factor) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = multiply_unfused(data[i], factor);
  }
}

struct Float16Bits {
  __device__ static float to_float(uint16_t bits) {
    return ops::detail::float16_to_float_inline(bits);
  }
  __device__ static uint16_t from_float(float value) {
    return ops::detail::float_to_float16_inline(value);
  }
};

struct BFloat16Bits {
  __device__ static float to_float(uint16_t bits) {
    return ops::detail::bfloat16_to_float_inline(bits);
  }
  __device__ static uint16_t from_float(float value) {
    return ops::detail::float_to_bfloat16_inline(value);
  }
};

// float16 and bfloat16: widened to float32, multiplied by the float32
// factor, rounded back to nearest even (ops/reduce.cc, scale_half).
template <typename Format>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scale_half_kernel(uint16_t* data, int64_t count, float factor) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = Format::from_float(multiply_unfused(Format::to_float(data[i]), factor));
  }
}

// The saturation limits of T, computed on the host exactly as
// ops/reduce.cc's scale_integer does (std::numeric_limits is host-only).
template <typename T>
struct IntegerBounds {
  double below_lowest;   // min() - 1.0 as double: -1, -2^k - 1, or -2^63 for int64
  double above_highest;  // max() + 1.0 as double: 2^k, exact
  T min;
  T max;
};

template <typename T>
IntegerBounds<T> integer_bounds() {
  return {static_cast<double>(std::numeric_limits<T>::min()) - 1.0,
          static_cast<double>(std::numeric_limits<T>::max()) + 1.0, std::numeric_limits<T>::min(),
          std::numeric_limits<T>::max()};
}

// Integers: multiply in double and truncate toward zero (the conversion's
// own rounding, as on the CPU), a NaN product becomes 0, and products whose
// truncation leaves the range saturate; the comparisons happen in double
// because converting an out-of-range double to an integer is undefined.
template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scale_integer_kernel(T* data, int64_t count, double factor, IntegerBounds<T> bounds) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const double product = multiply_unfused(static_cast<double>(data[i]), factor);
    T result;
    if (isnan(product)) {
      result = 0;
    } else if (product <= bounds.below_lowest) {
      result = bounds.min;
    } else if (product >= bounds.above_highest) {
      result = bounds.max;
    } else {
      result = static_cast<T>(product);
    }
    data[i] = result;
  }
}

// Integer division truncating toward zero, as the CPU's int64 division.
// `Wide` is int32_t when both the elements and the divisor fit in it (the
// quotient is then the same, and a 32-bit division is several times cheaper
// on the GPU than a 64-bit one), int64_t otherwise.
template <typename T, typename Wide>
__global__ void __launch_bounds__(kThreadsPerBlock)
    divide_integer_kernel(T* data, int64_t count, Wide divisor) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = static_cast<T>(static_cast<Wide>(data[i]) / divisor);
  }
}

// Elements of 2, 4 or 8 bytes, as the unsigned integer of that width.
template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock) fill_kernel(T* data, int64_t count, T value) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) data[i] = value;
}

__global__ void __launch_bounds__(kThreadsPerBlock)
    float_to_float16_kernel(const float* input, uint16_t* output, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    output[i] = ops::detail::float_to_float16_inline(input[i]);
  }
}

__global__ void __launch_bounds__(kThreadsPerBlock)
    float16_to_float_kernel(const uint16_t* input, float* output, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    output[i] = ops::detail::float16_to_float_inline(input[i]);
  }
}

// ---------------------------------------------------------------------------
// Host-side checks and launches.

// Bytes per element, 0 for a value outside the enum (which element_size,
// like the CPU functions, rejects by throwing).
std::size_t element_bytes(DataType dtype) {
  try {
    return element_size(dtype);
  } catch (const herd::detail::InternalError&) {
    return 0;
  }
}

bool is_known(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProduct:
    case ReduceOp::kAdasum: return true;  // identity zeros, as for a sum
  }
  return false;
}

bool is_integer(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64: return true;
    default: return false;
  }
}

// The checks every elementwise entry point shares: the count, the dtype, the
// pointer. Returns ok when the call may go on (and count > 0).
Status check_elementwise(const char* function, const void* data, int64_t count, DataType dtype,
                         const std::string& other_arguments) {
  auto fail = [&](const char* problem) {
    return Status::error(fmt::format("ops::cuda::{}: {} (data {}, count {}, dtype {}{})", function,
                                     problem, fmt::ptr(data), count, to_string(dtype),
                                     other_arguments));
  };
  if (count < 0) return fail("negative count");
  if (element_bytes(dtype) == 0) return fail("unknown dtype");
  if (count > 0 && data == nullptr) return fail("null data");
  return Status::ok();
}

// Queues `kernel` over `count` elements (count > 0) and reports a failed
// launch. cudaGetLastError (not Peek) so that a launch error is consumed
// here and not reported again by the next unrelated check on this thread.
// The thread's last error is cleared first: an earlier call that returned a
// non-error code (cudaEventQuery's cudaErrorNotReady) or an application's
// unchecked failure must not pass for this launch's. A sticky error (a
// faulted context) is not cleared by this and still shows.
template <typename... Params, typename... Args>
Status launch_elementwise(const char* function, void (*kernel)(Params...), int64_t count,
                          DataType dtype, cudaStream_t stream, Args... args) {
  (void)cudaGetLastError();
  kernel<<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(args...);
  return HERD_CUDA_STATUS(cudaGetLastError())
      .with_context(
          fmt::format("ops::cuda::{} ({} elements of {}): ", function, count, to_string(dtype)));
}

template <typename T>
Status launch_scale_integer(void* data, int64_t count, DataType dtype, double factor,
                            cudaStream_t stream) {
  return launch_elementwise("scale", &scale_integer_kernel<T>, count, dtype, stream,
                            static_cast<T*>(data), count, factor, integer_bounds<T>());
}

template <typename T>
Status launch_divide_integer(void* data, int64_t count, DataType dtype, int64_t divisor,
                             cudaStream_t stream) {
  if (sizeof(T) <= sizeof(int32_t) && divisor <= std::numeric_limits<int32_t>::max()) {
    return launch_elementwise("divide", &divide_integer_kernel<T, int32_t>, count, dtype, stream,
                              static_cast<T*>(data), count, static_cast<int32_t>(divisor));
  }
  return launch_elementwise("divide", &divide_integer_kernel<T, int64_t>, count, dtype, stream,
                            static_cast<T*>(data), count, divisor);
}

template <typename T>
Status launch_fill(void* data, int64_t count, DataType dtype, const unsigned char* element,
                   cudaStream_t stream) {
  T value;
  std::memcpy(&value, element, sizeof(T));
  return launch_elementwise("fill_identity", &fill_kernel<T>, count, dtype, stream,
                            static_cast<T*>(data), count, value);
}

// ---------------------------------------------------------------------------
// Batched copy.
//
// One launch carries up to kCopyTasksPerLaunch tasks in its parameter. Each
// task is cut into pieces of kCopyWordsPerBlock words, one block a piece, and
// the launch's grid is the pieces of all its tasks back to back: a block
// finds its task by a binary search over the tasks' first blocks. Work is
// spread by bytes, not by tasks, so a fusion buffer of one 9 MiB gradient
// and a hundred small ones keeps every SM busy until the last piece, and a
// small task costs one block, not a row of idle ones.
//
// Within a task the words are of the widest width (16 bytes as a uint4,
// then 8, 4, 2) at which source and destination sit at the same offset,
// since only then can one access be aligned on both sides: the head (the
// bytes before the destination's first word boundary) and the tail (the
// bytes after the last whole word) go a byte at a time, by the task's first
// block; the words between go kCopyWordsPerThread per thread, all loaded
// before any is stored, so that each thread keeps that many loads in flight.
// Two pointers at different offsets mod 2 leave only bytes. So a float32
// tensor whose source and destination offsets are multiples of 4 copies in
// 4-byte words at worst, and in 16-byte vectors when both are multiples of
// 16.

constexpr int kCopyWordsPerThread = 8;
constexpr uint64_t kCopyWordsPerBlock = uint64_t{kThreadsPerBlock} * kCopyWordsPerThread;

struct DeviceCopyTask {
  const unsigned char* source;
  unsigned char* destination;
  uint64_t bytes;
};

struct CopyBatch {
  DeviceCopyTask tasks[kCopyTasksPerLaunch];
  // Task t's pieces are blocks first_block[t] .. first_block[t + 1] - 1.
  uint32_t first_block[kCopyTasksPerLaunch + 1];
  int task_count;
};
static_assert(sizeof(CopyBatch) <= 4096, "a kernel's parameters are limited to 4 KiB");

// 16, 8, 4, 2 or 1: the widest power of two modulo which the two addresses
// agree.
__host__ __device__ uint64_t shared_alignment(const DeviceCopyTask& task) {
  const auto offsets = reinterpret_cast<std::uintptr_t>(task.source) ^
                       reinterpret_cast<std::uintptr_t>(task.destination);
  uint64_t width = kVectorBytes;
  while (width > 1 && (offsets & (width - 1)) != 0) width /= 2;
  return width;
}

// How a task splits into head bytes, whole words of `width` bytes and tail
// bytes; the same on the host (to size the grid) and on the device.
struct CopyLayout {
  uint64_t head;        // bytes before the destination's first word boundary
  uint64_t words;       // whole words after the head
  uint64_t tail_begin;  // first byte after the last whole word
};

__host__ __device__ CopyLayout layout_of(const DeviceCopyTask& task, uint64_t width) {
  const auto misalignment = reinterpret_cast<std::uintptr_t>(task.destination) & (width - 1);
  uint64_t head = (width - misalignment) & (width - 1);
  if (head > task.bytes) head = task.bytes;
  const uint64_t words = (task.bytes - head) / width;
  return CopyLayout{head, words, head + words * width};
}

// Piece `piece` of one task, in words of type Word; the caller has checked
// that source and destination agree modulo sizeof(Word).
template <typename Word>
__device__ void copy_piece(const DeviceCopyTask& task, uint64_t piece) {
  const CopyLayout layout = layout_of(task, sizeof(Word));
  if (piece == 0) {
    for (uint64_t i = threadIdx.x; i < layout.head; i += kThreadsPerBlock) {
      task.destination[i] = task.source[i];
    }
    for (uint64_t i = layout.tail_begin + threadIdx.x; i < task.bytes; i += kThreadsPerBlock) {
      task.destination[i] = task.source[i];
    }
  }
  // destination + head is word-aligned by the choice of head, and source +
  // head too, because the two agree modulo the word size.
  const auto* __restrict__ source_words = reinterpret_cast<const Word*>(task.source + layout.head);
  auto* __restrict__ destination_words = reinterpret_cast<Word*>(task.destination + layout.head);
  const uint64_t first = piece * kCopyWordsPerBlock + threadIdx.x;
  Word values[kCopyWordsPerThread];
#pragma unroll
  for (int k = 0; k < kCopyWordsPerThread; ++k) {
    const uint64_t w = first + static_cast<uint64_t>(k) * kThreadsPerBlock;
    if (w < layout.words) values[k] = source_words[w];
  }
#pragma unroll
  for (int k = 0; k < kCopyWordsPerThread; ++k) {
    const uint64_t w = first + static_cast<uint64_t>(k) * kThreadsPerBlock;
    if (w < layout.words) destination_words[w] = values[k];
  }
}

__global__ void __launch_bounds__(kThreadsPerBlock) batched_copy_kernel(const CopyBatch batch) {
  // This block's task: the last whose first block is not after it.
  const uint32_t block = blockIdx.x;
  int low = 0;
  int high = batch.task_count - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (batch.first_block[middle] <= block) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  const DeviceCopyTask task = batch.tasks[low];
  const uint64_t piece = block - batch.first_block[low];
  // The same width for the whole block: the branch never diverges in a warp.
  switch (shared_alignment(task)) {
    case 16: return copy_piece<uint4>(task, piece);
    case 8: return copy_piece<uint64_t>(task, piece);
    case 4: return copy_piece<uint32_t>(task, piece);
    case 2: return copy_piece<uint16_t>(task, piece);
    default: return copy_piece<unsigned char>(task, piece);
  }
}

// The blocks of one task: a piece per kCopyWordsPerBlock words, at least one
// (for the head and tail bytes of a task without whole words).
uint64_t pieces_of(const DeviceCopyTask& task) {
  const uint64_t words = layout_of(task, shared_alignment(task)).words;
  return std::max<uint64_t>(1, (words + kCopyWordsPerBlock - 1) / kCopyWordsPerBlock);
}

Status launch_copy_batch(const CopyBatch& batch, int64_t launch, cudaStream_t stream) {
  const uint32_t blocks = batch.first_block[batch.task_count];
  (void)cudaGetLastError();  // as in launch_elementwise
  batched_copy_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(batch);
  return HERD_CUDA_STATUS(cudaGetLastError())
      .with_context(fmt::format("ops::cuda::batched_copy (launch {}, {} tasks, {} blocks): ",
                                launch, batch.task_count, blocks));
}

}  // namespace

Status batched_copy(const std::vector<CopyTask>& tasks, cudaStream_t stream) {
  // Every task is checked before the first launch, so that a bad one queues
  // nothing at all.
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const CopyTask& task = tasks[i];
    if (task.bytes > 0 && (task.source == nullptr || task.destination == nullptr)) {
      return Status::error(fmt::format(
          "ops::cuda::batched_copy: task {} of {} has a null pointer (source {}, destination {}, "
          "{} bytes)",
          i, tasks.size(), fmt::ptr(task.source), fmt::ptr(task.destination), task.bytes));
    }
  }

  // A launch ends at kCopyTasksPerLaunch tasks, or before a task whose
  // pieces would take its grid past what a block index holds.
  constexpr uint64_t kMostBlocks = std::numeric_limits<int32_t>::max();
  CopyBatch batch{};
  uint64_t blocks = 0;
  int64_t launch = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const CopyTask& task = tasks[i];
    if (task.bytes == 0) continue;
    const DeviceCopyTask device_task{static_cast<const unsigned char*>(task.source),
                                     static_cast<unsigned char*>(task.destination), task.bytes};
    const uint64_t pieces = pieces_of(device_task);
    if (pieces > kMostBlocks) {
      return Status::error(
          fmt::format("ops::cuda::batched_copy: task {} of {} ({} bytes) needs {} blocks, more "
                      "than one launch holds ({})",
                      i, tasks.size(), task.bytes, pieces, kMostBlocks));
    }
    if (batch.task_count == kCopyTasksPerLaunch || blocks + pieces > kMostBlocks) {
      HERD_RETURN_IF_ERROR(launch_copy_batch(batch, launch++, stream));
      batch = CopyBatch{};
      blocks = 0;
    }
    batch.tasks[batch.task_count] = device_task;
    batch.first_block[batch.task_count] = static_cast<uint32_t>(blocks);
    blocks += pieces;
    ++batch.task_count;
    batch.first_block[batch.task_count] = static_cast<uint32_t>(blocks);
  }
  if (batch.task_count > 0) HERD_RETURN_IF_ERROR(launch_copy_batch(batch, launch, stream));
  return Status::ok();
}

Status scale(void* data, int64_t count, DataType dtype, double factor, cudaStream_t stream) {
  HERD_RETURN_IF_ERROR(
      check_elementwise("scale", data, count, dtype, fmt::format(", factor {}", factor)));
  if (factor == 1.0 || count == 0) return Status::ok();
  switch (dtype) {
    case DataType::kUInt8: return launch_scale_integer<uint8_t>(data, count, dtype, factor, stream);
    case DataType::kInt8: return launch_scale_integer<int8_t>(data, count, dtype, factor, stream);
    case DataType::kInt16: return launch_scale_integer<int16_t>(data, count, dtype, factor, stream);
    case DataType::kInt32: return launch_scale_integer<int32_t>(data, count, dtype, factor, stream);
    case DataType::kInt64: return launch_scale_integer<int64_t>(data, count, dtype, factor, stream);
    case DataType::kFloat16:
      return launch_elementwise("scale", &scale_half_kernel<Float16Bits>, count, dtype, stream,
                                static_cast<uint16_t*>(data), count, static_cast<float>(factor));
    case DataType::kBFloat16:
      return launch_elementwise("scale", &scale_half_kernel<BFloat16Bits>, count, dtype, stream,
                                static_cast<uint16_t*>(data), count, static_cast<float>(factor));
    case DataType::kFloat32:
      return launch_elementwise("scale", &scale_floating_kernel<float>, count, dtype, stream,
                                static_cast<float*>(data), count, static_cast<float>(factor));
    case DataType::kFloat64:
      return launch_elementwise("scale", &scale_floating_kernel<double>, count, dtype, stream,
                                static_cast<double*>(data), count, factor);
  }
  return Status::error(fmt::format("ops::cuda::scale: unknown dtype {}", to_string(dtype)));
}

Status divide(void* data, int64_t count, DataType dtype, int64_t divisor, cudaStream_t stream) {
  HERD_RETURN_IF_ERROR(
      check_elementwise("divide", data, count, dtype, fmt::format(", divisor {}", divisor)));
  if (divisor < 1) {
    return Status::error(
        fmt::format("ops::cuda::divide: divisor {} is below 1 (data {}, count {}, "
                    "dtype {})",
                    divisor, fmt::ptr(data), count, to_string(dtype)));
  }
  if (divisor == 1 || count == 0) return Status::ok();
  switch (dtype) {
    case DataType::kUInt8:
      return launch_divide_integer<uint8_t>(data, count, dtype, divisor, stream);
    case DataType::kInt8: return launch_divide_integer<int8_t>(data, count, dtype, divisor, stream);
    case DataType::kInt16:
      return launch_divide_integer<int16_t>(data, count, dtype, divisor, stream);
    case DataType::kInt32:
      return launch_divide_integer<int32_t>(data, count, dtype, divisor, stream);
    case DataType::kInt64:
      return launch_divide_integer<int64_t>(data, count, dtype, divisor, stream);
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      // The CPU's contract: multiply by the reciprocal, taken in double and
      // then applied in each type's precision.
      return scale(data, count, dtype, 1.0 / static_cast<double>(divisor), stream);
  }
  return Status::error(fmt::format("ops::cuda::divide: unknown dtype {}", to_string(dtype)));
}

Status average(void* data, int64_t count, DataType dtype, int64_t ranks, double postscale,
               cudaStream_t stream) {
  HERD_RETURN_IF_ERROR(check_elementwise(
      "average", data, count, dtype, fmt::format(", ranks {}, postscale {}", ranks, postscale)));
  if (ranks < 1) {
    return Status::error(
        fmt::format("ops::cuda::average: ranks {} is below 1 (data {}, count {}, dtype {})", ranks,
                    fmt::ptr(data), count, to_string(dtype)));
  }
  // ops::average's rule: an exact integer division where the postscale is
  // 1, otherwise one scaling by postscale / ranks.
  if (is_integer(dtype) && postscale == 1.0) return divide(data, count, dtype, ranks, stream);
  return scale(data, count, dtype, postscale / static_cast<double>(ranks), stream);
}

Status fill_identity(void* data, int64_t count, DataType dtype, ReduceOp op, cudaStream_t stream) {
  HERD_RETURN_IF_ERROR(check_elementwise("fill_identity", data, count, dtype,
                                         fmt::format(", op {}", to_string(op))));
  if (!is_known(op)) {
    return Status::error(
        fmt::format("ops::cuda::fill_identity: unknown op (data {}, count {}, dtype {}, op {})",
                    fmt::ptr(data), count, to_string(dtype), to_string(op)));
  }
  if (count == 0) return Status::ok();
  const std::size_t size = element_bytes(dtype);
  if (static_cast<uint64_t>(count) > std::numeric_limits<std::size_t>::max() / size) {
    return Status::error(fmt::format("ops::cuda::fill_identity: count {} of {} overflows size_t",
                                     count, to_string(dtype)));
  }
  // The element comes from the CPU function itself, so the two cannot
  // disagree on any identity.
  unsigned char element[sizeof(uint64_t)] = {};
  ops::fill_identity(element, 1, dtype, op);
  // A pattern of one repeated byte (every sum identity, every 1-byte type)
  // is a memset, which needs no kernel of ours.
  if (std::all_of(element, element + size, [&](unsigned char b) { return b == element[0]; })) {
    return HERD_CUDA_STATUS(
               cudaMemsetAsync(data, element[0], static_cast<std::size_t>(count) * size, stream))
        .with_context(
            fmt::format("ops::cuda::fill_identity ({} elements of {}): ", count, to_string(dtype)));
  }
  switch (size) {
    case 2: return launch_fill<uint16_t>(data, count, dtype, element, stream);
    case 4: return launch_fill<uint32_t>(data, count, dtype, element, stream);
    default: return launch_fill<uint64_t>(data, count, dtype, element, stream);
  }
}

Status float_to_float16(const float* input, uint16_t* output, int64_t count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && (input == nullptr || output == nullptr))) {
    return Status::error(
        fmt::format("ops::cuda::float_to_float16: bad arguments (input {}, output "
                    "{}, count {})",
                    fmt::ptr(input), fmt::ptr(output), count));
  }
  if (count == 0) return Status::ok();
  return launch_elementwise("float_to_float16", &float_to_float16_kernel, count, DataType::kFloat32,
                            stream, input, output, count);
}

Status float16_to_float(const uint16_t* input, float* output, int64_t count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && (input == nullptr || output == nullptr))) {
    return Status::error(
        fmt::format("ops::cuda::float16_to_float: bad arguments (input {}, output "
                    "{}, count {})",
                    fmt::ptr(input), fmt::ptr(output), count));
  }
  if (count == 0) return Status::ok();
  return launch_elementwise("float16_to_float", &float16_to_float_kernel, count, DataType::kFloat16,
                            stream, input, output, count);
}

}  // namespace herd::ops::cuda
