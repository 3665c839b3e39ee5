// The skip of a GPU test that finds no GPU: CTest's SKIP_RETURN_CODE, and
// the check every GPU test program's main() makes first. Under mpiexec every
// rank decides alike (each sees the same machine), before MPI starts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>

namespace herd::testing {

constexpr int kSkipped = 77;

// The number of visible CUDA devices, or 0 after printing why there is none
// ("skipped: no CUDA device visible (...)").
inline int visible_devices_or_explain() {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error == cudaSuccess && devices > 0) return devices;
  std::printf("skipped: no CUDA device visible (cudaGetDeviceCount: %s, %d devices)\n",
              error != cudaSuccess ? cudaGetErrorString(error) : "no error", devices);
  return 0;
}

}  // namespace herd::testing
