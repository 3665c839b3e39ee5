// The raw allreduces herd's GPU row is compared with (gpu_bench.h), each
// on the same device buffers as herd and each a small class behind one
// interface, so that the sweep does not know which were built:
//   nccl:       ncclAllReduce on a communicator of the benchmark's own
//               (gpu_nccl_baseline.cc where herd is built with NCCL,
//               gpu_nccl_missing.cc, which declines, where it is not);
//   mpi-staged: the result of a copy to pinned host memory, MPI_Allreduce
//               there and a copy back (gpu_mpi_baseline.cc): what herd's
//               HERD_GPU_ALLREDUCE=MPI path does, without the runtime.
//
// Compiled only where herd is built with CUDA. Created, used and destroyed by
// herd-bench's main thread on every rank, collectively: every rank must call
// the same functions in the same order.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "benchmarks/herd_bench/gpu_cuda.h"
#include "herd/types.h"

namespace herd::bench {

class GpuAllreduceBaseline {
 public:
  virtual ~GpuAllreduceBaseline() = default;

  // The row's path: "nccl", "mpi-staged".
  virtual const char* path() const = 0;

  // What the row runs, for the note above the table ("<path>: ...").
  virtual std::string note() const = 0;

  // "" when the baseline can reduce `dtype` with `op` on this sweep's ranks;
  // otherwise why not, for a "# <path>: skipped, ..." note. The same on
  // every rank.
  virtual std::string unsupported(DataType dtype, ReduceOp op) const = 0;

  // The most elements one call takes (MPI's int counts).
  virtual int64_t max_count() const { return INT64_MAX; }

  // output = op over the ranks of input: `count` elements of device memory
  // on the current device. Returns once the result is in `output`, as
  // herd::allreduce does, so that the sweep times both alike. Throws
  // std::runtime_error on a failure.
  virtual void allreduce(const void* input, void* output, int64_t count, DataType dtype,
                         ReduceOp op) = 0;

  // The same, only queued: the result is in `output` after synchronize().
  // Where the library cannot queue (MPI staged through the host), it is
  // allreduce.
  virtual void enqueue_allreduce(const void* input, void* output, int64_t count, DataType dtype,
                                 ReduceOp op) {
    allreduce(input, output, count, dtype, op);
  }
  virtual void synchronize() {}
};

// The nccl row: a communicator over `comm` (ncclGetUniqueId on rank 0,
// MPI_Bcast, ncclCommInitRank on placement.device), used on `stream`.
// Returns nullptr, and why in `*declined`, where herd-bench was built without
// NCCL or two ranks share a GPU (NCCL refuses that); the same on every rank.
std::unique_ptr<GpuAllreduceBaseline> make_nccl_baseline(MPI_Comm comm,
                                                         const GpuPlacement& placement,
                                                         cudaStream_t stream,
                                                         std::string* declined);

// The mpi-staged row: on its own MPI_Comm_dup of `comm`, through a pinned
// host buffer, on `stream`. An average is a sum divided by the number of
// ranks on the host before the copy back (timed), as herd does.
std::unique_ptr<GpuAllreduceBaseline> make_mpi_staged_baseline(MPI_Comm comm, cudaStream_t stream);

}  // namespace herd::bench
