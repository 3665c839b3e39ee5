// Value types of herd's public API: element types, reduction operators,
// devices and the non-owning TensorView that every collective takes.
// Plain data; safe to use from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd {

// The enumerators' values are part of the negotiation wire format
// (src/message.cc): a new type is appended, never inserted.
enum class DataType {
  kUInt8,
  kInt8,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kInt16,
};

// kAverage is a sum followed by a division by the process set's size (ranks
// that have called herd::join included: they contribute zeros); for integer
// types that division truncates toward zero (see docs/collectives.md).
// kAdasum combines the ranks' vectors by the Adasum rule (collectives/adasum.h):
// allreduce only, float16/float32/float64 CPU tensors, on a process set whose
// size is a power of two. Like DataType, a new operator is appended.
enum class ReduceOp {
  kSum,
  kAverage,
  kMin,
  kMax,
  kProduct,
  kAdasum,
};

enum class DeviceType {
  kCPU,
  kGPU,
};

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // GPU ordinal; 0 for the CPU

  static Device cpu() { return Device{}; }
  static Device gpu(int index) { return Device{DeviceType::kGPU, index}; }
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

// Bytes per element of `dtype`.
std::size_t element_size(DataType dtype);
// "float32", "int8", ...: the names error messages use.
std::string to_string(DataType dtype);
// "sum", "average", "min", "max", "product", "adasum".
std::string to_string(ReduceOp op);
// "cpu", "gpu:1".
std::string to_string(const Device& device);
// "[4,3]"; "[]" for a scalar.
std::string shape_to_string(const std::vector<int64_t>& shape);

// A non-owning view of a dense tensor: `data` must stay valid, and must not be
// written by the caller, until the operation that received the view completes.
//
// A view of GPU memory (device = Device::gpu(i), in a build with CUDA) may
// name the CUDA stream its data is produced on: herd records an event on that
// stream when the operation is submitted and starts reading only once the
// work queued before it has finished, so the caller need not synchronize.
// nullptr means the legacy default stream. Only the input's stream is waited
// for: an output in another buffer must have no work pending on another
// stream. herd::wait returns once the result is in the output, so work
// queued on any stream after it sees the result. GPU views are taken on the
// global process set only (docs/gpu.md).
struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  Device device = Device::cpu();
  void* stream = nullptr;  // cudaStream_t of a GPU view; ignored for the CPU

  // Product of the shape's extents; 1 for a scalar (empty shape). Both
  // throw herd::Error naming the shape when an extent is negative or the
  // count or the bytes exceed 2^63-1 (herd refuses such views at submission).
  int64_t num_elements() const;
  std::size_t num_bytes() const;
};

}  // namespace herd
