// Memory on a device: what herd::Tensor and the runtime's GPU buffers are
// allocated with, so that code above common/ never calls cudaMalloc itself.
//
// CMake compiles one of two definitions: common/cuda/device_memory.cc in a
// build with CUDA, common/device_memory_cpu_only.cc without. Any thread.
#pragma once

#include <cstddef>
#include <memory>

#include "herd/types.h"

namespace herd::detail {

// Frees host or device memory, whichever it points to.
using DeviceMemory = std::unique_ptr<void, void (*)(void*)>;

// Whether this build of herd has CUDA (and so GPU tensors at all).
bool cuda_built();
// Whether this build of herd has NCCL.
bool nccl_built();
// NCCL_VERSION_CODE of the nccl.h herd was built with (22809 for 2.28.9), 0
// without NCCL.
int nccl_version_code();

// At least `bytes` (one byte for zero) on `device`, uninitialized: new[] on
// the CPU, cudaMalloc on a GPU. Throws herd::Error when the device does not
// exist, this build has no CUDA, or the allocation fails; the message names
// the device and the size.
DeviceMemory allocate(const Device& device, std::size_t bytes);

}  // namespace herd::detail
