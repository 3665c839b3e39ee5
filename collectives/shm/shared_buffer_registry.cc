#include "collectives/shm/shared_buffer_registry.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

namespace herd::collectives {
namespace {

struct Registry {
  std::mutex mutex;
  // By the address of the buffer's first byte.
  std::map<uintptr_t, SharedBufferAllocation> buffers;
  uint64_t last_id = 0;
};

Registry& registry() {
  // Never destroyed: buffers may be released from static destructors.
  static Registry* const instance = new Registry;
  return *instance;
}

}  // namespace

Status allocate_shared_buffer(std::size_t bytes, SharedBufferAllocation* allocation) {
  if (bytes == 0) return Status::error("a shared buffer of 0 bytes");
  const int fd = memfd_create("herd-shared-buffer", MFD_CLOEXEC);
  if (fd < 0) {
    return Status::error(fmt::format("allocating a shared buffer of {} bytes: memfd_create: {}",
                                     bytes, std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return Status::error(fmt::format("allocating a shared buffer of {} bytes: ftruncate: {}", bytes,
                                     std::strerror(error)));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return Status::error(fmt::format("allocating a shared buffer of {} bytes: mmap: {}", bytes,
                                     std::strerror(error)));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  *allocation = SharedBufferAllocation{++r.last_id, fd, data, bytes};
  r.buffers[reinterpret_cast<uintptr_t>(data)] = *allocation;
  return Status::ok();
}

std::optional<SharedBufferRange> find_shared_buffer(const void* data, std::size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // The last buffer starting at or before `data`.
  auto it = r.buffers.upper_bound(begin);
  if (it == r.buffers.begin()) return std::nullopt;
  --it;
  const SharedBufferAllocation& buffer = it->second;
  const std::size_t offset = begin - it->first;
  if (offset > buffer.bytes || bytes > buffer.bytes - offset) return std::nullopt;
  return SharedBufferRange{buffer.id, buffer.fd, offset};
}

void release_shared_buffer(void* data) {
  SharedBufferAllocation buffer;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.buffers.find(reinterpret_cast<uintptr_t>(data));
    if (it == r.buffers.end()) return;
    buffer = it->second;
    r.buffers.erase(it);
  }
  munmap(buffer.data, buffer.bytes);
  close(buffer.fd);
}

}  // namespace herd::collectives
