// DeviceCollectives: one way of running herd's collectives on GPU buffers,
// queued on the executor's stream: NCCL (flat, or hierarchical for the
// allreduce), or MPI through pinned host memory.
//
// Made by one process set's GpuExecutor (src/gpu/gpu_set_executor.h) and
// used by the thread running that set's cycles. Every member of the set
// makes the same kinds in the same order (the executor chooses by settings
// that init checked to be equal on every rank, and by the response), since
// making an NCCL communicator is collective. Reductions take kSum, kMin,
// kMax or kProduct: the executor turns an average into a sum and divides on
// the device, so both kinds round alike.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "herd/types.h"

namespace herd::detail {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;

  // "NCCL", "hierarchical NCCL+MPI", "MPI (host staging)": for messages.
  virtual const char* kind() const = 0;
  // Whether it can reduce `dtype` (NCCL has no 16-bit integers).
  virtual bool can_reduce(DataType dtype) const = 0;

  // The same contracts as collectives/nccl/nccl_communicator.h: `recv` =
  // op over ranks of `send` (in place when equal); parts of unequal sizes
  // are allowed where a vector of sizes is taken. Positions count members
  // of the set. Every function queues on `stream`; those of the MPI path
  // also block the calling thread for their host part.
  [[nodiscard]] virtual Status allreduce(const void* send, void* recv, int64_t count,
                                         DataType dtype, ReduceOp op, cudaStream_t stream) = 0;
  [[nodiscard]] virtual Status allgatherv(const void* send, void* recv,
                                          const std::vector<int64_t>& bytes_per_rank,
                                          cudaStream_t stream) = 0;
  [[nodiscard]] virtual Status broadcast(void* data, std::size_t bytes, int root,
                                         cudaStream_t stream) = 0;
  [[nodiscard]] virtual Status reducescatterv(void* send, void* recv,
                                              const std::vector<int64_t>& counts, DataType dtype,
                                              ReduceOp op, cudaStream_t stream) = 0;
  [[nodiscard]] virtual Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes,
                                         void* recv, const std::vector<int64_t>& recv_bytes,
                                         cudaStream_t stream) = 0;

  // An error that surfaced after enqueue (NCCL's asynchronous errors); ok
  // for kinds that have none.
  [[nodiscard]] virtual Status async_error() = 0;
  // Makes every queued collective of this kind that waits return (NCCL's
  // abort); later calls fail. A no-op for the MPI path, which never leaves
  // a collective queued behind the calling thread.
  virtual void abort() = 0;
};

// The MPI path: blocks of `block_bytes` copied to pinned host memory on a
// copy stream, reduced by the host algorithms over `transport` (the set's
// MPI transport, with `options`' segment size and algorithm choice) while
// the next block is copied, and copied back on the executor's stream. The
// executor's device must be current.
std::unique_ptr<DeviceCollectives> make_staged_collectives(collectives::Transport& transport,
                                                           collectives::AllreduceOptions options,
                                                           std::size_t block_bytes);

// NCCL over the members of `comm` (collective over them). With
// `hierarchical`, allreduces run as reduce-scatter inside each node (NCCL),
// allreduce across nodes (MPI ring over host staging) and allgather inside
// the node; it fails when nodes hold different numbers of the set's ranks.
// In a build without NCCL it fails, saying so.
[[nodiscard]] Status make_nccl_collectives(MPI_Comm comm, int device, bool hierarchical,
                                           collectives::AllreduceOptions options,
                                           std::unique_ptr<DeviceCollectives>* out);

}  // namespace herd::detail
