// gpu_baselines.h's mpi-staged row: a GPU allreduce with plain MPI and no
// CUDA-aware transport, the way herd's MPI path for GPU tensors works.
#include <climits>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/gpu_baselines.h"
#include "ops/reduce.h"

namespace herd::bench {
namespace {

// Each call: the input to pinned host memory, MPI_Allreduce in place there,
// the division of an average, the result back to `output`; one wait on the
// stream after each copy.
class MpiStagedBaseline : public GpuAllreduceBaseline {
 public:
  MpiStagedBaseline(MPI_Comm comm, cudaStream_t stream) : comm_(comm), stream_(stream) {
    HERD_MPI_CHECK(MPI_Comm_size(comm_.get(), &ranks_));
  }

  const char* path() const override { return "mpi-staged"; }

  std::string note() const override {
    return "mpi-staged: the input copied to pinned host memory, MPI_Allreduce there, the result "
           "copied back (HERD_GPU_ALLREDUCE=MPI's route without herd's runtime)";
  }

  std::string unsupported(DataType dtype, ReduceOp) const override {
    if (mpi_type(dtype) == MPI_DATATYPE_NULL) return "MPI has no " + to_string(dtype) + " type";
    return "";
  }

  int64_t max_count() const override { return INT_MAX; }

  void allreduce(const void* input, void* output, int64_t count, DataType dtype,
                 ReduceOp op) override {
    const std::size_t bytes = static_cast<std::size_t>(count) * element_size(dtype);
    void* host = staging_.reserve(bytes);
    copy_to_host(host, input, bytes, stream_);
    HERD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, host, static_cast<int>(count), mpi_type(dtype),
                                 mpi_op(op), comm_.get()));
    if (op == ReduceOp::kAverage) ops::divide(host, count, dtype, ranks_);
    copy_to_device(output, host, bytes, stream_);
  }

 private:
  DupComm comm_;
  cudaStream_t stream_;
  int ranks_ = 1;
  PinnedBuffer staging_;
};

}  // namespace

std::unique_ptr<GpuAllreduceBaseline> make_mpi_staged_baseline(MPI_Comm comm, cudaStream_t stream) {
  return std::make_unique<MpiStagedBaseline>(comm, stream);
}

}  // namespace herd::bench
