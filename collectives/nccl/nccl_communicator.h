// NcclCommunicator: one NCCL communicator over the members of an MPI
// communicator, one GPU per member, and the collectives herd runs on it.
//
// Created collectively by every member (rank 0 makes the ncclUniqueId and
// MPI_Bcast shares it), owned by the runtime's GPU executor of one process
// set and used only by the thread running that set's cycles. Every
// collective queues work on the caller's stream and returns at once; the
// Status reports what NCCL refused at enqueue time, with NCCL's text. Errors
// that surface later (a peer gone, a network failure) are read with
// async_error(); abort() cancels whatever waits, on every rank that calls it,
// so no rank hangs in a collective for ever.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "herd/types.h"

namespace herd::collectives {

class NcclCommunicator {
 public:
  // Collective over `comm`: every member calls it with its own `device`
  // (the CUDA ordinal its buffers live on), which create() makes current
  // (cudaSetDevice) and leaves current. A member whose device does not exist
  // fails create() on every member, before any of them waits in NCCL.
  [[nodiscard]] static Status create(MPI_Comm comm, int device,
                                     std::unique_ptr<NcclCommunicator>* out);
  // ncclCommDestroy, or nothing more after abort(). ncclCommDestroy waits
  // for the work queued on the communicator: abort() first if a peer is gone.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  // Whether NCCL can reduce `dtype` (it has no 16-bit integer type).
  static bool can_reduce(DataType dtype);

  // recv = op over ranks of send, `count` elements; in place when send ==
  // recv. `op` is kSum, kMin, kMax or kProduct: the average is a sum whose
  // division the caller does, so that integers follow herd's rule.
  [[nodiscard]] Status allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                 ReduceOp op, cudaStream_t stream);
  // Rank r's bytes_per_rank[r] bytes of `send` land at offset
  // sum(bytes_per_rank[<r]) of every rank's `recv`. Equal parts use
  // ncclAllGather; unequal ones one ncclBroadcast per rank in a group.
  [[nodiscard]] Status allgatherv(const void* send, void* recv,
                                  const std::vector<int64_t>& bytes_per_rank, cudaStream_t stream);
  // `bytes` of the root's `data` to every rank's `data`; `root` counts
  // members of this communicator.
  [[nodiscard]] Status broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream);
  // `send` holds sum(counts) elements, part r of counts[r] elements; rank r
  // receives op over ranks of part r into `recv`. Equal parts use
  // ncclReduceScatter; unequal ones one ncclReduce per rank in a group.
  [[nodiscard]] Status reducescatterv(const void* send, void* recv,
                                      const std::vector<int64_t>& counts, DataType dtype,
                                      ReduceOp op, cudaStream_t stream);
  // send_bytes[r] bytes (consecutive in `send`) to rank r; recv_bytes[r]
  // bytes from rank r (consecutive in `recv`): grouped ncclSend/ncclRecv,
  // and a device-to-device copy for this rank's own part. Rank a's
  // send_bytes[b] must equal rank b's recv_bytes[a]; send and recv must not
  // overlap.
  [[nodiscard]] Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes,
                                 void* recv, const std::vector<int64_t>& recv_bytes,
                                 cudaStream_t stream);

  // ncclCommGetAsyncError: ok while nothing has gone wrong (or the
  // communicator is still working), else NCCL's error with its text.
  [[nodiscard]] Status async_error();
  // ncclCommAbort: frees the communicator and makes every kernel of it that
  // waits return; later calls fail with "aborted". Idempotent.
  void abort();
  bool aborted() const { return aborted_; }

 private:
  NcclCommunicator() = default;

  void* comm_ = nullptr;  // ncclComm_t, kept out of this header
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  bool aborted_ = false;
};

}  // namespace herd::collectives
