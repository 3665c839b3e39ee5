// MPI point-to-point transport.
//
// Owned by the runtime, used only by its background thread (so
// MPI_THREAD_SERIALIZED would do for this class; herd asks for MULTIPLE so the
// application may use MPI too). The communicator is the caller's, used as is:
// give herd its own MPI_Comm_dup so its tags never meet the application's.
//
// MPI counts are int: a message longer than max_message_bytes (INT_MAX by
// default) goes as several MPI messages, each at most that long. Tests lower
// the limit to reach the split with small buffers.
#pragma once

#include <climits>
#include <cstddef>
#include <string>

#include <mpi.h>

#include "collectives/transport.h"

namespace herd::collectives {

constexpr std::size_t kMaxMpiMessageBytes = INT_MAX;

class MpiTransport final : public Transport {
 public:
  // Sets MPI_ERRORS_RETURN on `comm`, so that failures come back as Status.
  explicit MpiTransport(MPI_Comm comm, std::size_t max_message_bytes = kMaxMpiMessageBytes);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::unique_ptr<PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) override;
  std::unique_ptr<PendingTransfer> irecv(void* data, std::size_t bytes, int peer,
                                         int tag) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::size_t max_message_bytes_;
};

// "MPI_Isend: MPI_ERR_RANK: invalid rank" for an MPI error code.
std::string mpi_error_string(const char* call, int code);

}  // namespace herd::collectives
