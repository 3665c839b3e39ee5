// NcclCommunicator over NCCL and MPI; see nccl_communicator.h.
//
// Used by one thread at a time (the thread running the process set's cycles)
// with the communicator's device current; abort() belongs to that thread too.
//
// Every member calls each collective with the same arguments apart from its
// buffers: the same count, dtype, op and root, and the same `bytes_per_rank`
// or `counts` vector (for alltoallv, rank a's send_bytes[b] equals rank b's
// recv_bytes[a]). So every member takes the same path below (equal parts or
// not), skips the same empty parts, and makes matching NCCL calls in the
// same order, which NCCL requires. A *part* is one rank's share of a
// collective: rank r's bytes in allgatherv, block r of reducescatterv's
// input, the bytes between two ranks in alltoallv. Part r starts at `offset`
// r, the sum of the parts before it.
//
// Mapping to NCCL:
// - allreduce: ncclAllReduce (in place when send == recv).
// - allgatherv: equal parts are one ncclAllGather of bytes. Unequal parts are
//   a group of one ncclBroadcast per non-empty part r, root r, into recv at
//   offset r; the root passes its `send` as the broadcast's sendbuff, so NCCL
//   copies its own part into place too.
// - broadcast: ncclBroadcast in place.
// - reducescatterv: equal counts are one ncclReduceScatter. Unequal counts
//   are a group of one ncclReduce per non-empty part r, root r, reducing part
//   r of every rank's send into rank r's recv (the other ranks pass no
//   recvbuff, which NCCL allows off the root).
// - alltoallv: this rank's own part is a cudaMemcpyAsync on the stream, queued
//   before the group; then one group of ncclSend and ncclRecv, one pair per
//   other rank, empty parts left out.
// Byte-moving calls use ncclUint8, so they work for every dtype; reducing
// calls use the dtype's NCCL type, and int16 has none.
//
// Zero-element collectives queue nothing. Counts are int64 in herd and size_t
// in NCCL: a negative one is an error, as is any argument NCCL would refuse
// that can be checked here (vector lengths, the root, a self-exchange whose
// two sizes differ), before any NCCL call, so an error leaves no half-issued
// group behind on this rank. A call inside a group that fails still reaches
// ncclGroupEnd: NCCL counts group depth per thread, and ncclGroupEnd is what
// drops the group's queued calls after an error.
#include "collectives/nccl/nccl_communicator.h"

#include <nccl.h>

#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collectives/mpi/mpi_check.h"
#include "collectives/nccl/nccl_check.h"
#include "common/cuda/cuda_check.h"
#include "common/enforce.h"
#include "common/logging.h"

namespace herd::collectives {
namespace {

ncclComm_t nccl_comm(void* comm) { return static_cast<ncclComm_t>(comm); }

// NCCL's type for reducing `dtype`; none for int16.
std::optional<ncclDataType_t> nccl_reduce_type(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt8: return ncclInt8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt16: return std::nullopt;
  }
  return std::nullopt;
}

Status reduce_type(DataType dtype, ncclDataType_t* type) {
  const std::optional<ncclDataType_t> found = nccl_reduce_type(dtype);
  if (!found) {
    return Status::error(
        fmt::format("NCCL has no {} type, so it cannot reduce {} data (use the MPI path for it)",
                    to_string(dtype), to_string(dtype)));
  }
  *type = *found;
  return Status::ok();
}

// kAverage is refused: it is a sum that the caller divides, so that integer
// averages truncate as herd documents (ncclAvg would round differently).
Status reduce_op(ReduceOp op, ncclRedOp_t* nccl_op) {
  switch (op) {
    case ReduceOp::kSum: *nccl_op = ncclSum; return Status::ok();
    case ReduceOp::kProduct: *nccl_op = ncclProd; return Status::ok();
    case ReduceOp::kMin: *nccl_op = ncclMin; return Status::ok();
    case ReduceOp::kMax: *nccl_op = ncclMax; return Status::ok();
    case ReduceOp::kAverage:
      return Status::error(
          "NCCL reductions take sum, min, max or product, not average: reduce an average as a "
          "sum and divide by the number of ranks");
    case ReduceOp::kAdasum:
      return Status::not_implemented(
          "NCCL reductions do not take Adasum, which herd runs on the "
          "CPU only");
  }
  return Status::error(fmt::format("unknown reduction operator {}", static_cast<int>(op)));
}

// `value` as NCCL's size_t count; an error for a negative value.
Status to_count(int64_t value, const char* what, std::size_t* count) {
  if (value < 0) return Status::error(fmt::format("{} is negative ({})", what, value));
  *count = static_cast<std::size_t>(value);
  return Status::ok();
}

// One part per rank, in units of `unit_bytes` (1 for byte counts, the
// element size for element counts): part r holds sizes[r] units starting at
// unit offsets[r].
struct Parts {
  std::vector<std::size_t> sizes;
  std::vector<std::size_t> offsets;
  bool equal = true;  // every part has sizes[0] units
};

// Checks that `parts` has one non-negative entry per rank and that the whole
// buffer, in bytes, fits in a size_t.
Status layout_parts(const std::vector<int64_t>& parts, const char* what, int ranks,
                    std::size_t unit_bytes, Parts* layout) {
  if (parts.size() != static_cast<std::size_t>(ranks)) {
    return Status::error(
        fmt::format("{} has {} entries, expected one per rank ({})", what, parts.size(), ranks));
  }
  const std::size_t max_units = std::numeric_limits<std::size_t>::max() / unit_bytes;
  std::size_t total = 0;
  layout->sizes.clear();
  layout->offsets.clear();
  layout->equal = true;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (parts[r] < 0) {
      return Status::error(fmt::format("{}[{}] is negative ({})", what, r, parts[r]));
    }
    const auto size = static_cast<std::size_t>(parts[r]);
    if (size > max_units - total) {
      return Status::error(fmt::format("{} adds up to more than a size_t holds", what));
    }
    layout->offsets.push_back(total);
    layout->sizes.push_back(size);
    layout->equal = layout->equal && size == layout->sizes.front();
    total += size;
  }
  return Status::ok();
}

// Runs `enqueue` (which returns a Status) between ncclGroupStart and
// ncclGroupEnd, reaching ncclGroupEnd even when a call inside failed; the
// first failure is returned.
template <typename Enqueue>
Status in_group(const Enqueue& enqueue) {
  HERD_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  const Status enqueued = enqueue();
  const Status ended = HERD_NCCL_STATUS(ncclGroupEnd());
  return enqueued.is_ok() ? ended : enqueued;
}

// "NCCL allreduce on rank 1 of 4 (device 1): " before a failure's message.
Status in_context(const Status& status, const char* collective,
                  const NcclCommunicator& communicator) {
  if (status.is_ok()) return status;
  return status.with_context(fmt::format("NCCL {} on rank {} of {} (device {}): ", collective,
                                         communicator.rank(), communicator.size(),
                                         communicator.device()));
}

Status aborted_error(const char* call, const NcclCommunicator& communicator) {
  return Status::error(
      fmt::format("NCCL communicator was aborted (rank {} of {}, device {}); {} cannot run on it",
                  communicator.rank(), communicator.size(), communicator.device(), call));
}

// This rank's share of create() before the ranks meet in NCCL: the device
// exists and is made current; rank 0 also makes the unique id.
Status prepare_rank(int device, bool make_id, ncclUniqueId* id) {
  int devices = 0;
  HERD_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices));
  if (device < 0 || device >= devices) {
    return Status::error(fmt::format("CUDA device {} does not exist ({} device{} visible)", device,
                                     devices, devices == 1 ? "" : "s"));
  }
  HERD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (make_id) HERD_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(id));
  return Status::ok();
}

}  // namespace

// The ranks first agree (MPI_Allreduce of a flag) that every one of them could
// prepare its part, so that one rank's bad device or failed ncclGetUniqueId
// fails create() on every rank instead of leaving the others waiting in
// ncclCommInitRank. Then rank 0's id goes to all (MPI_Bcast of its bytes) and
// every rank joins the communicator.
Status NcclCommunicator::create(MPI_Comm comm, int device, std::unique_ptr<NcclCommunicator>* out) {
  HERD_ENFORCE(out != nullptr);
  int rank = 0;
  int size = 0;
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Comm_rank(comm, &rank)).with_context("creating an NCCL communicator: "));
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Comm_size(comm, &size)).with_context("creating an NCCL communicator: "));
  const std::string context = fmt::format(
      "creating the NCCL communicator of rank {} of {} on device {}: ", rank, size, device);

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  const Status prepared = prepare_rank(device, rank == 0, &id);
  const int prepared_here = prepared.is_ok() ? 1 : 0;
  int prepared_everywhere = 0;
  HERD_RETURN_IF_ERROR(HERD_MPI_STATUS(MPI_Allreduce(&prepared_here, &prepared_everywhere, 1,
                                                     MPI_INT, MPI_MIN, comm))
                           .with_context(context));
  if (!prepared.is_ok()) return prepared.with_context(context);
  if (prepared_everywhere == 0) {
    return Status::error(context + "another rank could not prepare its part (its error says why)");
  }
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm))
          .with_context(context));

  ncclComm_t nccl = nullptr;
  const Status initialized = HERD_NCCL_STATUS(ncclCommInitRank(&nccl, size, id, rank));
  if (!initialized.is_ok()) {
    // NCCL frees what it allocated and nulls the handle when it fails early;
    // a communicator that failed later still exists and must be aborted.
    if (nccl != nullptr) (void)ncclCommAbort(nccl);
    return initialized.with_context(context);
  }
  std::unique_ptr<NcclCommunicator> communicator(new NcclCommunicator());
  communicator->comm_ = nccl;
  communicator->rank_ = rank;
  communicator->size_ = size;
  communicator->device_ = device;
  *out = std::move(communicator);
  return Status::ok();
}

// ncclCommDestroy waits for the work queued on this communicator, which never
// ends when a peer is gone: abort() first in that case.
NcclCommunicator::~NcclCommunicator() {
  if (aborted_ || comm_ == nullptr) return;
  const ncclResult_t result = ncclCommDestroy(nccl_comm(comm_));
  if (result != ncclSuccess) {
    HERD_LOG(kWarning, "ncclCommDestroy on rank {} of {} (device {}) failed: {}", rank_, size_,
             device_, ::herd::detail::nccl_error_text(result));
  }
}

bool NcclCommunicator::can_reduce(DataType dtype) { return nccl_reduce_type(dtype).has_value(); }

Status NcclCommunicator::allreduce(const void* send, void* recv, int64_t count, DataType dtype,
                                   ReduceOp op, cudaStream_t stream) {
  if (aborted_) return aborted_error("allreduce", *this);
  const Status status = [&]() -> Status {
    ncclDataType_t type = ncclUint8;
    HERD_RETURN_IF_ERROR(reduce_type(dtype, &type));
    ncclRedOp_t nccl_op = ncclSum;
    HERD_RETURN_IF_ERROR(reduce_op(op, &nccl_op));
    std::size_t elements = 0;
    HERD_RETURN_IF_ERROR(to_count(count, "the element count", &elements));
    if (elements == 0) return Status::ok();
    HERD_NCCL_RETURN_IF_ERROR(
        ncclAllReduce(send, recv, elements, type, nccl_op, nccl_comm(comm_), stream));
    return Status::ok();
  }();
  return in_context(status, "allreduce", *this);
}

Status NcclCommunicator::allgatherv(const void* send, void* recv,
                                    const std::vector<int64_t>& bytes_per_rank,
                                    cudaStream_t stream) {
  if (aborted_) return aborted_error("allgatherv", *this);
  const Status status = [&]() -> Status {
    Parts parts;
    HERD_RETURN_IF_ERROR(layout_parts(bytes_per_rank, "bytes_per_rank", size_, 1, &parts));
    if (parts.equal) {
      if (parts.sizes.front() == 0) return Status::ok();
      HERD_NCCL_RETURN_IF_ERROR(
          ncclAllGather(send, recv, parts.sizes.front(), ncclUint8, nccl_comm(comm_), stream));
      return Status::ok();
    }
    auto* out = static_cast<unsigned char*>(recv);
    return in_group([&]() -> Status {
      for (int root = 0; root < size_; ++root) {
        const auto r = static_cast<std::size_t>(root);
        if (parts.sizes[r] == 0) continue;
        unsigned char* destination = out + parts.offsets[r];
        // Only the root's sendbuff is read; the others pass their destination.
        const void* source = root == rank_ ? send : destination;
        HERD_NCCL_RETURN_IF_ERROR(ncclBroadcast(source, destination, parts.sizes[r], ncclUint8,
                                                root, nccl_comm(comm_), stream));
      }
      return Status::ok();
    });
  }();
  return in_context(status, "allgatherv", *this);
}

Status NcclCommunicator::broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) {
  if (aborted_) return aborted_error("broadcast", *this);
  const Status status = [&]() -> Status {
    if (root < 0 || root >= size_) {
      return Status::error(
          fmt::format("root {} is not a rank of this communicator (0..{})", root, size_ - 1));
    }
    if (bytes == 0) return Status::ok();
    HERD_NCCL_RETURN_IF_ERROR(
        ncclBroadcast(data, data, bytes, ncclUint8, root, nccl_comm(comm_), stream));
    return Status::ok();
  }();
  return in_context(status, "broadcast", *this);
}

Status NcclCommunicator::reducescatterv(const void* send, void* recv,
                                        const std::vector<int64_t>& counts, DataType dtype,
                                        ReduceOp op, cudaStream_t stream) {
  if (aborted_) return aborted_error("reducescatterv", *this);
  const Status status = [&]() -> Status {
    ncclDataType_t type = ncclUint8;
    HERD_RETURN_IF_ERROR(reduce_type(dtype, &type));
    ncclRedOp_t nccl_op = ncclSum;
    HERD_RETURN_IF_ERROR(reduce_op(op, &nccl_op));
    const std::size_t element_bytes = element_size(dtype);
    Parts parts;
    HERD_RETURN_IF_ERROR(layout_parts(counts, "counts", size_, element_bytes, &parts));
    if (parts.equal) {
      if (parts.sizes.front() == 0) return Status::ok();
      HERD_NCCL_RETURN_IF_ERROR(ncclReduceScatter(send, recv, parts.sizes.front(), type, nccl_op,
                                                  nccl_comm(comm_), stream));
      return Status::ok();
    }
    const auto* in = static_cast<const unsigned char*>(send);
    return in_group([&]() -> Status {
      for (int root = 0; root < size_; ++root) {
        const auto r = static_cast<std::size_t>(root);
        if (parts.sizes[r] == 0) continue;
        // Only the root receives; NCCL takes a null recvbuff elsewhere.
        void* destination = root == rank_ ? recv : nullptr;
        HERD_NCCL_RETURN_IF_ERROR(ncclReduce(in + parts.offsets[r] * element_bytes, destination,
                                             parts.sizes[r], type, nccl_op, root, nccl_comm(comm_),
                                             stream));
      }
      return Status::ok();
    });
  }();
  return in_context(status, "reducescatterv", *this);
}

Status NcclCommunicator::alltoallv(const void* send, const std::vector<int64_t>& send_bytes,
                                   void* recv, const std::vector<int64_t>& recv_bytes,
                                   cudaStream_t stream) {
  if (aborted_) return aborted_error("alltoallv", *this);
  const Status status = [&]() -> Status {
    Parts sends;
    HERD_RETURN_IF_ERROR(layout_parts(send_bytes, "send_bytes", size_, 1, &sends));
    Parts receives;
    HERD_RETURN_IF_ERROR(layout_parts(recv_bytes, "recv_bytes", size_, 1, &receives));
    const auto self = static_cast<std::size_t>(rank_);
    if (sends.sizes[self] != receives.sizes[self]) {
      return Status::error(fmt::format(
          "this rank sends itself {} bytes but expects {} bytes from itself (send_bytes[{}] "
          "and recv_bytes[{}] differ)",
          sends.sizes[self], receives.sizes[self], rank_, rank_));
    }
    const auto* in = static_cast<const unsigned char*>(send);
    auto* out = static_cast<unsigned char*>(recv);
    const unsigned char* own_source = in + sends.offsets[self];
    unsigned char* own_destination = out + receives.offsets[self];
    if (sends.sizes[self] > 0 && own_source != own_destination) {
      HERD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(own_destination, own_source, sends.sizes[self],
                                                cudaMemcpyDeviceToDevice, stream));
    }
    if (size_ == 1) return Status::ok();
    return in_group([&]() -> Status {
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_) continue;
        const auto p = static_cast<std::size_t>(peer);
        if (sends.sizes[p] > 0) {
          HERD_NCCL_RETURN_IF_ERROR(ncclSend(in + sends.offsets[p], sends.sizes[p], ncclUint8, peer,
                                             nccl_comm(comm_), stream));
        }
        if (receives.sizes[p] > 0) {
          HERD_NCCL_RETURN_IF_ERROR(ncclRecv(out + receives.offsets[p], receives.sizes[p],
                                             ncclUint8, peer, nccl_comm(comm_), stream));
        }
      }
      return Status::ok();
    });
  }();
  return in_context(status, "alltoallv", *this);
}

Status NcclCommunicator::async_error() {
  if (aborted_) return aborted_error("async_error", *this);
  ncclResult_t async = ncclSuccess;
  const Status queried = HERD_NCCL_STATUS(ncclCommGetAsyncError(nccl_comm(comm_), &async));
  if (!queried.is_ok()) return in_context(queried, "error check", *this);
  // ncclInProgress: a nonblocking call still working, not a failure.
  if (async == ncclSuccess || async == ncclInProgress) return Status::ok();
  return Status::error(fmt::format("NCCL asynchronous error on rank {} of {} (device {}): {}",
                                   rank_, size_, device_,
                                   ::herd::detail::nccl_error_text(async, nccl_comm(comm_))));
}

void NcclCommunicator::abort() {
  if (aborted_) return;
  aborted_ = true;
  ncclComm_t comm = nccl_comm(comm_);
  comm_ = nullptr;
  if (comm == nullptr) return;
  const ncclResult_t result = ncclCommAbort(comm);
  if (result != ncclSuccess) {
    HERD_LOG(kWarning, "ncclCommAbort on rank {} of {} (device {}) failed: {}", rank_, size_,
             device_, ::herd::detail::nccl_error_text(result));
  }
}

}  // namespace herd::collectives
