// DeviceBuffer and PinnedBuffer: grow-only scratch memory of the GPU executor
// (the fusion buffer, reducescatter's working copy, the hierarchical
// allreduce's padded copy) and of the MPI path (pinned host staging).
//
// Owned by one process set's executor and used by the thread running its
// cycles. Growing frees the old memory first; callers grow only after the
// stream that used it has finished with it (they synchronize, or the old
// contents are not needed: cudaFree waits for the device anyway).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include <fmt/format.h>

#include "common/cuda/cuda_check.h"
#include "common/device_memory.h"

namespace herd::detail {

class DeviceBuffer {
 public:
  // At least `bytes` on the current device, reusing the buffer when it is
  // large enough. Contents are not kept.
  [[nodiscard]] Status reserve(int device, std::size_t bytes, uint8_t** data) {
    if (bytes > capacity_ || !memory_) {
      memory_.reset();
      capacity_ = 0;
      try {
        memory_ = allocate(Device::gpu(device), bytes);
      } catch (const std::exception& error) {
        return Status::error(error.what());
      }
      capacity_ = bytes;
    }
    *data = static_cast<uint8_t*>(memory_.get());
    return Status::ok();
  }
  std::size_t capacity() const { return capacity_; }
  void release() {
    memory_.reset();
    capacity_ = 0;
  }

 private:
  DeviceMemory memory_{nullptr, nullptr};
  std::size_t capacity_ = 0;
};

// Page-locked host memory: what cudaMemcpyAsync needs to copy without a
// hidden synchronous bounce through a driver buffer.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  [[nodiscard]] Status reserve(std::size_t bytes, uint8_t** data) {
    if (bytes > capacity_ || data_ == nullptr) {
      release();
      void* memory = nullptr;
      HERD_RETURN_IF_ERROR(
          HERD_CUDA_STATUS(cudaHostAlloc(&memory, bytes > 0 ? bytes : 1, cudaHostAllocDefault))
              .with_context(fmt::format("pinned staging buffer of {} bytes: ", bytes)));
      data_ = static_cast<uint8_t*>(memory);
      capacity_ = bytes;
    }
    *data = data_;
    return Status::ok();
  }
  std::size_t capacity() const { return capacity_; }

 private:
  void release() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
    data_ = nullptr;
    capacity_ = 0;
  }

  uint8_t* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace herd::detail
