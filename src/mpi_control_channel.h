// MpiControlChannel: the ControlChannel of a process set over MPI.
//
// ProcessSetState makes one per set on a communicator of the set's own (an
// MPI_Comm_dup of the set's members), so that the negotiation's messages
// never meet the set's data transfers, another set's or the application's.
// Every MPI call is checked (collectives/mpi/mpi_check.h): a failure comes
// back as Status with the call, file and line and MPI's error text.
#pragma once

#include <cstdint>
#include <vector>

#include <mpi.h>

#include "common/status.h"
#include "src/control_channel.h"

namespace herd::detail {

class MpiControlChannel final : public ControlChannel {
 public:
  // Sets MPI_ERRORS_RETURN on `comm`; the caller keeps ownership of it.
  // Throws herd::Error when MPI refuses.
  explicit MpiControlChannel(MPI_Comm comm);

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  [[nodiscard]] Status and_allreduce(std::vector<uint64_t>* words) override;
  [[nodiscard]] Status gather_to_root(const std::vector<uint8_t>& mine,
                                      std::vector<std::vector<uint8_t>>* per_rank) override;
  [[nodiscard]] Status broadcast_from_root(std::vector<uint8_t>* bytes) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace herd::detail
