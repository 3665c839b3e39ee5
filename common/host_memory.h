// Host allocation shared by both definitions of device_memory.h.
#pragma once

#include <cstddef>
#include <new>

#include "common/device_memory.h"

namespace herd::detail {

// At least `bytes` (one byte for zero), aligned for every element type.
inline DeviceMemory allocate_host(std::size_t bytes) {
  const std::size_t words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  void* memory = new std::max_align_t[words > 0 ? words : 1];
  return DeviceMemory(memory, [](void* p) { delete[] static_cast<std::max_align_t*>(p); });
}

}  // namespace herd::detail
