#include "src/control_channel.h"

#include <climits>

#include <fmt/format.h>

#include "collectives/mpi/mpi_transport.h"

namespace herd::detail {
namespace {

Status check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::ok();
  return Status::error(collectives::mpi_error_string(call, code));
}

}  // namespace

ControlChannel::ControlChannel(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status ControlChannel::and_allreduce(std::vector<uint64_t>* words) {
  if (words->size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(
        fmt::format("control allreduce of {} words exceeds MPI's int count", words->size()));
  }
  return check_mpi(MPI_Allreduce(MPI_IN_PLACE, words->data(), static_cast<int>(words->size()),
                                 MPI_UINT64_T, MPI_BAND, comm_),
                   "MPI_Allreduce (control bits)");
}

Status ControlChannel::gather_to_root(const std::vector<uint8_t>& mine,
                                      std::vector<std::vector<uint8_t>>* per_rank) {
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format("rank {}: request list of {} bytes exceeds MPI's int count",
                                     rank_, mine.size()));
  }
  const int my_bytes = static_cast<int>(mine.size());
  std::vector<int> counts(rank_ == 0 ? size_ : 0);
  HERD_RETURN_IF_ERROR(
      check_mpi(MPI_Gather(&my_bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_),
                "MPI_Gather (request sizes)"));

  std::vector<int> displacements;
  std::vector<uint8_t> all;
  if (rank_ == 0) {
    displacements.resize(size_);
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displacements[r] = static_cast<int>(total);
      total += counts[r];
      if (total > INT_MAX) {
        return Status::error(
            fmt::format("request lists of all ranks total {} bytes, over MPI's int count", total));
      }
    }
    all.resize(static_cast<std::size_t>(total));
  }
  HERD_RETURN_IF_ERROR(
      check_mpi(MPI_Gatherv(mine.data(), my_bytes, MPI_BYTE, all.data(), counts.data(),
                            displacements.data(), MPI_BYTE, 0, comm_),
                "MPI_Gatherv (request lists)"));
  if (rank_ == 0) {
    per_rank->assign(size_, {});
    for (int r = 0; r < size_; ++r) {
      (*per_rank)[r].assign(all.begin() + displacements[r],
                            all.begin() + displacements[r] + counts[r]);
    }
  }
  return Status::ok();
}

Status ControlChannel::broadcast_from_root(std::vector<uint8_t>* bytes) {
  uint64_t length = bytes->size();
  HERD_RETURN_IF_ERROR(
      check_mpi(MPI_Bcast(&length, 1, MPI_UINT64_T, 0, comm_), "MPI_Bcast (response size)"));
  if (length > static_cast<uint64_t>(INT_MAX)) {
    return Status::error(fmt::format("response list of {} bytes exceeds MPI's int count", length));
  }
  bytes->resize(static_cast<std::size_t>(length));
  return check_mpi(MPI_Bcast(bytes->data(), static_cast<int>(length), MPI_BYTE, 0, comm_),
                   "MPI_Bcast (response list)");
}

}  // namespace herd::detail
