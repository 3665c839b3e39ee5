// device_memory.h for a build without CUDA: only the CPU has memory.
#include <fmt/format.h>

#include "common/device_memory.h"
#include "common/host_memory.h"
#include "herd/error.h"

namespace herd::detail {

bool cuda_built() { return false; }
bool nccl_built() { return false; }
int nccl_version_code() { return 0; }

DeviceMemory allocate(const Device& device, std::size_t bytes) {
  if (device.type == DeviceType::kCPU) return allocate_host(bytes);
  throw Error(
      fmt::format("cannot allocate {} bytes on {}: this build of herd has no GPU support "
                  "(configure with -DHERD_WITH_CUDA=ON where CUDA is installed)",
                  bytes, to_string(device)));
}

}  // namespace herd::detail
