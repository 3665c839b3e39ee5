// ControlChannel: the small collectives of the negotiation.
//
// One per process set on each member rank, used only by the thread running
// that set's cycles (BackgroundLoop; the cycle lock lets one run at a time).
// Every method is a collective: all ranks of the set call it in the same
// order. Failures come back as Status, naming the rank and what failed.
//
// Two implementations: MpiControlChannel (mpi_control_channel.h), which the
// set's ProcessSetState owns, on a communicator of the set's own; and the
// channels of an InprocControlWorld (inproc_control_channel.h), where threads
// play ranks, so that the background loop runs in unit tests without MPI.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace herd::detail {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;

  // This rank's position in the set, and the set's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // words[i] = AND over ranks of words[i]; every rank passes the same length.
  [[nodiscard]] virtual Status and_allreduce(std::vector<uint64_t>* words) = 0;

  // Rank 0 receives every rank's bytes (per_rank[r]); other ranks get nothing.
  [[nodiscard]] virtual Status gather_to_root(const std::vector<uint8_t>& mine,
                                              std::vector<std::vector<uint8_t>>* per_rank) = 0;

  // Every rank ends with rank 0's bytes.
  [[nodiscard]] virtual Status broadcast_from_root(std::vector<uint8_t>* bytes) = 0;
};

}  // namespace herd::detail
