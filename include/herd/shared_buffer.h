// herd::SharedBuffer: host memory that the other ranks on this machine can
// map, so that allreduces of tensors kept in it read straight from each
// other's memory (registered memory).
//
// The shared-memory allreduce between the ranks of one machine otherwise
// copies every rank's input into shared slots, or reads it with the
// kernel's cross-memory copy. When a call's input and output lie in
// SharedBuffers on every rank, each rank maps the others' buffers (once per
// buffer) and reduces its share of the result straight from them, then copies
// the others' shares straight from theirs: no copy between processes beyond
// the result's (docs/collectives.md, "Shared buffers"). Keep the gradients
// of a model in one SharedBuffer, each a view into it, and allreduce them in
// place: the optimizer's case. A call whose buffers are not in one on some
// rank, or that some rank cannot map, takes the other paths, with the same
// bits.
//
// The memory is zeroed, page-aligned, and lives in a memfd mapped shared;
// SharedBuffer may be made before or after herd::init and outlive
// herd::shutdown. Free it only when no allreduce on it is in flight. Movable,
// not copyable; not thread-safe (one owner at a time).
#pragma once

#include <cstddef>

namespace herd {

class SharedBuffer {
 public:
  // An empty buffer (data() nullptr, size() 0).
  SharedBuffer() = default;
  // `bytes` of zeroed shared memory (none for 0). Throws herd::Error naming
  // the size and the system's error when the allocation fails.
  explicit SharedBuffer(std::size_t bytes);
  ~SharedBuffer();
  SharedBuffer(SharedBuffer&& other) noexcept;
  SharedBuffer& operator=(SharedBuffer&& other) noexcept;
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace herd
