// gpu_baselines.h's nccl row for a herd-bench built with CUDA but without
// NCCL: declined, with the reason in the table's notes.
#include "benchmarks/herd_bench/gpu_baselines.h"

namespace herd::bench {

std::unique_ptr<GpuAllreduceBaseline> make_nccl_baseline(MPI_Comm, const GpuPlacement&,
                                                         cudaStream_t, std::string* declined) {
  *declined = "this herd-bench was built without NCCL";
  return nullptr;
}

}  // namespace herd::bench
