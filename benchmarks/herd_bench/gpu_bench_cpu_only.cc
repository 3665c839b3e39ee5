// gpu_bench.h for a herd-bench built without CUDA: --device cuda is refused
// with a message (exit code 2) before herd starts.
#include <stdexcept>

#include "benchmarks/herd_bench/gpu_bench.h"

namespace herd::bench {
namespace {

constexpr const char* kNotBuilt =
    "this herd-bench was built without CUDA (configure herd with -DHERD_WITH_CUDA=ON where "
    "nvcc and the CUDA toolkit are installed)";

}  // namespace

GpuProbe probe_gpu() { return GpuProbe{kExitFailure, kNotBuilt}; }

int64_t run_gpu_allreduce_bench(const AllreduceBenchOptions&, MPI_Comm) {
  throw std::runtime_error(kNotBuilt);
}

int64_t run_gpu_fusion_bench(const FusionBenchOptions&, MPI_Comm) {
  throw std::runtime_error(kNotBuilt);
}

int64_t run_gpu_step_bench(const StepBenchOptions&, MPI_Comm) {
  throw std::runtime_error(kNotBuilt);
}

}  // namespace herd::bench
