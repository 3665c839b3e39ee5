// herd::Tensor: an owning, contiguous tensor in host memory, or in the memory
// of a GPU (a build with CUDA; cudaMalloc'ed, freed when the Tensor is).
//
// The results of allgather, alltoall and reducescatter have sizes that only
// the negotiation between ranks decides, so the caller passes a Tensor and
// herd's background thread allocates and fills it before completing the
// handle. Read it only after herd::wait (or a true herd::poll) on that handle.
// Not thread-safe: one owner at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "herd/types.h"

namespace herd {

class Tensor {
 public:
  Tensor() = default;
  Tensor(DataType dtype, std::vector<int64_t> shape, Device device = Device::cpu()) {
    reset(dtype, std::move(shape), device);
  }

  // Drops the old contents and allocates room for `shape` on `device`,
  // uninitialized. Throws herd::Error for a negative extent (naming the
  // dimension and its value), for a GPU in a build without CUDA, or when the
  // GPU's allocation fails; the tensor is then empty (shape [0]) after an
  // allocation failure and unchanged after a negative extent.
  void reset(DataType dtype, std::vector<int64_t> shape, Device device = Device::cpu());

  DataType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const;
  std::size_t num_bytes() const {
    return static_cast<std::size_t>(num_elements()) * element_size(dtype_);
  }
  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }
  TensorView view() { return TensorView{data(), dtype_, shape_, device_}; }

 private:
  DataType dtype_ = DataType::kFloat32;
  std::vector<int64_t> shape_{0};
  Device device_ = Device::cpu();
  // Aligned for every element type (cudaMalloc aligns to 256 bytes). The
  // deleter frees host or device memory, whichever it is.
  std::unique_ptr<void, void (*)(void*)> storage_{nullptr, nullptr};
};

}  // namespace herd
