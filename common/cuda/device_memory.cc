// device_memory.h for a build with CUDA: GPU memory through cudaMalloc.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "common/cuda/device_guard.h"
#include "common/device_memory.h"
#include "common/host_memory.h"
#include "herd/error.h"

namespace herd::detail {

bool cuda_built() { return true; }
// HERD_NCCL_BUILT is defined for this file by common/CMakeLists.txt.
bool nccl_built() { return HERD_NCCL_BUILT != 0; }
int nccl_version_code() { return HERD_NCCL_BUILT != 0 ? HERD_NCCL_VERSION_CODE : 0; }

DeviceMemory allocate(const Device& device, std::size_t bytes) {
  if (device.type == DeviceType::kCPU) return allocate_host(bytes);
  auto fail = [&](const Status& status) {
    return Error(fmt::format("cannot allocate {} bytes on {}: {}", bytes, to_string(device),
                             status.message()));
  };
  DeviceGuard guard;
  Status status = guard.set(device.index);
  if (!status.is_ok()) throw fail(status);
  void* memory = nullptr;
  status = HERD_CUDA_STATUS(cudaMalloc(&memory, bytes > 0 ? bytes : 1));
  if (!status.is_ok()) throw fail(status);
  // cudaFree needs no current device: the address says which GPU it is on.
  return DeviceMemory(memory, [](void* p) { (void)cudaFree(p); });
}

}  // namespace herd::detail
