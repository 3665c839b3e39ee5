#include "herd/shared_buffer.h"

#include <utility>

#include "collectives/shm/shared_buffer_registry.h"
#include "herd/error.h"

namespace herd {

SharedBuffer::SharedBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  collectives::SharedBufferAllocation allocation;
  const Status status = collectives::allocate_shared_buffer(bytes, &allocation);
  if (!status.is_ok()) throw Error("herd::SharedBuffer: " + status.message());
  data_ = allocation.data;
  size_ = bytes;
}

SharedBuffer::~SharedBuffer() {
  if (data_ != nullptr) collectives::release_shared_buffer(data_);
}

SharedBuffer::SharedBuffer(SharedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedBuffer& SharedBuffer::operator=(SharedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) collectives::release_shared_buffer(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace herd
