// ControlChannel: the small collectives of the negotiation, over MPI.
//
// Owned by the Runtime, used only by the background thread, on a
// communicator of its own (an MPI_Comm_dup of the world) so its messages
// never meet the data transport's or the application's. Every method is a
// collective: all ranks call it in the same order. Failures come back as
// Status with the MPI call and MPI's error text.
#pragma once

#include <cstdint>
#include <vector>

#include <mpi.h>

#include "common/status.h"

namespace herd::detail {

class ControlChannel {
 public:
  // Sets MPI_ERRORS_RETURN on `comm`; the caller keeps ownership of it.
  explicit ControlChannel(MPI_Comm comm);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // words[i] = AND over ranks of words[i]; every rank passes the same length.
  [[nodiscard]] Status and_allreduce(std::vector<uint64_t>* words);

  // Rank 0 receives every rank's bytes (per_rank[r]); other ranks get nothing.
  [[nodiscard]] Status gather_to_root(const std::vector<uint8_t>& mine,
                                      std::vector<std::vector<uint8_t>>* per_rank);

  // Every rank ends with rank 0's bytes.
  [[nodiscard]] Status broadcast_from_root(std::vector<uint8_t>* bytes);

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace herd::detail
