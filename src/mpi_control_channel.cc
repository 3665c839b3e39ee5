#include "src/mpi_control_channel.h"

#include <climits>
#include <string>

#include <fmt/format.h>

#include "collectives/mpi/mpi_check.h"

namespace herd::detail {

MpiControlChannel::MpiControlChannel(MPI_Comm comm) : comm_(comm) {
  HERD_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  HERD_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  HERD_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

Status MpiControlChannel::and_allreduce(std::vector<uint64_t>* words) {
  if (words->size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format(
        "rank {}: control allreduce of {} words exceeds MPI's int count", rank_, words->size()));
  }
  return HERD_MPI_STATUS(MPI_Allreduce(MPI_IN_PLACE, words->data(), static_cast<int>(words->size()),
                                       MPI_UINT64_T, MPI_BAND, comm_))
      .with_context(fmt::format("rank {} of {}: control allreduce of {} words: ", rank_, size_,
                                words->size()));
}

Status MpiControlChannel::gather_to_root(const std::vector<uint8_t>& mine,
                                         std::vector<std::vector<uint8_t>>* per_rank) {
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format("rank {}: request list of {} bytes exceeds MPI's int count",
                                     rank_, mine.size()));
  }
  const std::string context = fmt::format("rank {} of {}: gathering request lists: ", rank_, size_);
  const int my_bytes = static_cast<int>(mine.size());
  std::vector<int> counts(rank_ == 0 ? size_ : 0);
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Gather(&my_bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_))
          .with_context(context));

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
      HERD_MPI_STATUS(MPI_Gatherv(mine.data(), my_bytes, MPI_BYTE, all.data(), counts.data(),
                                  displacements.data(), MPI_BYTE, 0, comm_))
          .with_context(context));
  if (rank_ == 0) {
    per_rank->assign(size_, {});
    for (int r = 0; r < size_; ++r) {
      (*per_rank)[r].assign(all.begin() + displacements[r],
                            all.begin() + displacements[r] + counts[r]);
    }
  }
  return Status::ok();
}

Status MpiControlChannel::broadcast_from_root(std::vector<uint8_t>* bytes) {
  const std::string context =
      fmt::format("rank {} of {}: broadcasting the response list: ", rank_, size_);
  uint64_t length = bytes->size();
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Bcast(&length, 1, MPI_UINT64_T, 0, comm_)).with_context(context));
  if (length > static_cast<uint64_t>(INT_MAX)) {
    return Status::error(fmt::format("response list of {} bytes exceeds MPI's int count", length));
  }
  bytes->resize(static_cast<std::size_t>(length));
  return HERD_MPI_STATUS(MPI_Bcast(bytes->data(), static_cast<int>(length), MPI_BYTE, 0, comm_))
      .with_context(context);
}

}  // namespace herd::detail
