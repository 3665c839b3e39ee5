// DeviceCollectives over NCCL (make_nccl_collectives in device_collectives.h):
// the flat kind, one NCCL communicator over the whole set, and the
// hierarchical kind for HERD_HIERARCHICAL_ALLREDUCE.
//
// Hierarchical allreduce of n elements on a set spread over nodes of L ranks
// each (local: the set's ranks on this node; cross: the set's ranks with the
// same local rank, one per node):
//   1. pad n up to a multiple of L (in a scratch copy when n is not one);
//      chunk = padded / L;
//   2. NCCL reduce-scatter inside the node: local rank l ends with the node's
//      sum of chunk l, in place at offset l * chunk;
//   3. if there are several nodes: chunk l down to pinned host memory, MPI
//      allreduce across nodes (herd's ring over the cross communicator), and
//      back up, so chunk l holds the sum over every rank of the set;
//   4. NCCL allgather inside the node: every rank gets every chunk.
// Inter-node traffic is one chunk per rank instead of the whole buffer
// through a ring of all ranks, which pays when links between nodes are much
// slower than NVLink inside one (docs/gpu.md gives the cost model). The other
// collectives use the flat communicator.
#include <cuda_runtime_api.h>

#include <algorithm>

#include <fmt/format.h>

#include "collectives/allreduce.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/nccl/nccl_communicator.h"
#include "common/cuda/cuda_check.h"
#include "ops/reduce.h"
#include "src/gpu/device_buffers.h"
#include "src/gpu/device_collectives.h"

namespace herd::detail {
namespace {

using collectives::NcclCommunicator;

class FlatNccl : public DeviceCollectives {
 public:
  explicit FlatNccl(std::unique_ptr<NcclCommunicator> comm) : comm_(std::move(comm)) {}

  const char* kind() const override { return "NCCL"; }
  bool can_reduce(DataType dtype) const override { return NcclCommunicator::can_reduce(dtype); }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   cudaStream_t stream) override {
    return comm_->allreduce(send, recv, count, dtype, op, stream);
  }
  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes_per_rank,
                    cudaStream_t stream) override {
    return comm_->allgatherv(send, recv, bytes_per_rank, stream);
  }
  Status broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) override {
    return comm_->broadcast(data, bytes, root, stream);
  }
  Status reducescatterv(void* send, void* recv, const std::vector<int64_t>& counts, DataType dtype,
                        ReduceOp op, cudaStream_t stream) override {
    return comm_->reducescatterv(send, recv, counts, dtype, op, stream);
  }
  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes, cudaStream_t stream) override {
    return comm_->alltoallv(send, send_bytes, recv, recv_bytes, stream);
  }
  Status async_error() override { return comm_->async_error(); }
  void abort() override { comm_->abort(); }

 private:
  std::unique_ptr<NcclCommunicator> comm_;
};

class HierarchicalNccl final : public FlatNccl {
 public:
  HierarchicalNccl(std::unique_ptr<NcclCommunicator> flat, std::unique_ptr<NcclCommunicator> local,
                   MPI_Comm cross_comm, collectives::AllreduceOptions options, int device)
      : FlatNccl(std::move(flat)),
        local_(std::move(local)),
        cross_comm_(cross_comm),
        cross_(std::make_unique<collectives::MpiTransport>(cross_comm)),
        options_(options),
        device_(device) {}

  ~HierarchicalNccl() override {
    cross_.reset();
    if (cross_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&cross_comm_));
  }

  const char* kind() const override { return "hierarchical NCCL+MPI"; }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   cudaStream_t stream) override {
    if (count == 0) return Status::ok();
    const int64_t ranks = local_->size();
    const int64_t chunk = (count + ranks - 1) / ranks;
    const int64_t padded = chunk * ranks;
    const std::size_t element = element_size(dtype);
    const std::size_t bytes = static_cast<std::size_t>(count) * element;
    // Step 1: work in place when the buffer needs no padding.
    uint8_t* work = static_cast<uint8_t*>(recv);
    if (padded != count) {
      HERD_RETURN_IF_ERROR(
          padded_.reserve(device_, static_cast<std::size_t>(padded) * element, &work));
    }
    if (work != send) {
      HERD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(work, send, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    // Step 2. The padding's values are whatever the scratch held: it is
    // reduced only with other padding and never copied out.
    uint8_t* mine = work + static_cast<std::size_t>(local_->rank() * chunk) * element;
    const std::vector<int64_t> counts(static_cast<std::size_t>(ranks), chunk);
    HERD_RETURN_IF_ERROR(local_->reducescatterv(work, mine, counts, dtype, op, stream)
                             .with_context("hierarchical allreduce, reduce-scatter in the node: "));
    // Step 3.
    if (cross_->size() > 1) {
      const std::size_t chunk_bytes = static_cast<std::size_t>(chunk) * element;
      uint8_t* host = nullptr;
      HERD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      HERD_RETURN_IF_ERROR(staging_.reserve(chunk_bytes, &host));
      HERD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(host, mine, chunk_bytes, cudaMemcpyDeviceToHost, stream));
      HERD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      HERD_RETURN_IF_ERROR(collectives::allreduce(host, host, chunk, element,
                                                  ops::make_reduce_fn(dtype, op), *cross_, options_)
                               .with_context("hierarchical allreduce, across nodes: "));
      HERD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(mine, host, chunk_bytes, cudaMemcpyHostToDevice, stream));
    }
    // Step 4.
    const std::vector<int64_t> chunk_bytes_per_rank(static_cast<std::size_t>(ranks),
                                                    chunk * static_cast<int64_t>(element));
    HERD_RETURN_IF_ERROR(local_->allgatherv(mine, work, chunk_bytes_per_rank, stream)
                             .with_context("hierarchical allreduce, allgather in the node: "));
    if (work != recv) {
      HERD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(recv, work, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    return Status::ok();
  }

  Status async_error() override {
    HERD_RETURN_IF_ERROR(FlatNccl::async_error());
    return local_->async_error();
  }
  void abort() override {
    FlatNccl::abort();
    local_->abort();
  }

 private:
  std::unique_ptr<NcclCommunicator> local_;
  MPI_Comm cross_comm_;
  std::unique_ptr<collectives::MpiTransport> cross_;
  const collectives::AllreduceOptions options_;
  const int device_;
  DeviceBuffer padded_;
  PinnedBuffer staging_;
};

// The set's ranks on this node, and the ranks of the same local rank across
// nodes; fails unless every node holds as many of the set's ranks.
Status split_by_node(MPI_Comm comm, MPI_Comm* local, MPI_Comm* cross) {
  int rank = 0;
  HERD_MPI_RETURN_IF_ERROR(MPI_Comm_rank(comm, &rank));
  HERD_MPI_RETURN_IF_ERROR(
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, local));
  int local_rank = 0;
  int local_size = 0;
  int sizes[2] = {0, 0};
  int extremes[2] = {0, 0};
  Status status = HERD_MPI_STATUS(MPI_Comm_rank(*local, &local_rank));
  if (status.is_ok()) status = HERD_MPI_STATUS(MPI_Comm_size(*local, &local_size));
  if (status.is_ok()) {
    sizes[0] = local_size;
    sizes[1] = -local_size;
    status = HERD_MPI_STATUS(MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, comm))
                 .with_context("comparing the nodes' sizes: ");
  }
  if (!status.is_ok()) {
    HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(local));
    return status;
  }
  if (extremes[0] != -extremes[1]) {
    HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(local));
    return Status::error(fmt::format(
        "HERD_HIERARCHICAL_ALLREDUCE=1 needs the same number of the set's ranks on every node, "
        "but nodes hold between {} and {} (this rank's node: {})",
        -extremes[1], extremes[0], local_size));
  }
  const Status split = HERD_MPI_STATUS(MPI_Comm_split(comm, local_rank, rank, cross));
  if (!split.is_ok()) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(local));
  return split;
}

}  // namespace

Status make_nccl_collectives(MPI_Comm comm, int device, bool hierarchical,
                             collectives::AllreduceOptions options,
                             std::unique_ptr<DeviceCollectives>* out) {
  std::unique_ptr<NcclCommunicator> flat;
  HERD_RETURN_IF_ERROR(NcclCommunicator::create(comm, device, &flat));
  if (!hierarchical) {
    *out = std::make_unique<FlatNccl>(std::move(flat));
    return Status::ok();
  }
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm cross = MPI_COMM_NULL;
  HERD_RETURN_IF_ERROR(split_by_node(comm, &local, &cross));
  std::unique_ptr<NcclCommunicator> local_comm;
  const Status created = NcclCommunicator::create(local, device, &local_comm);
  // NCCL keeps what it needs of `local`; the communicator is not needed after.
  const Status freed = HERD_MPI_STATUS(MPI_Comm_free(&local));
  if (!created.is_ok()) {
    HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&cross));
    return created.with_context("hierarchical allreduce, NCCL inside the node: ");
  }
  if (!freed.is_ok()) {
    HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&cross));
    return freed;
  }
  *out = std::make_unique<HierarchicalNccl>(std::move(flat), std::move(local_comm), cross, options,
                                            device);
  return Status::ok();
}

}  // namespace herd::detail
