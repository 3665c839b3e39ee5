// MPI point-to-point transport.
//
// Owned by the runtime, used only by its background thread (so
// MPI_THREAD_SERIALIZED would do for this class; herd asks for MULTIPLE so the
// application may use MPI too). The communicator is the caller's, used as is:
// give herd its own MPI_Comm_dup so its tags never meet the application's.
//
// MPI counts are int: a message longer than max_message_bytes (INT_MAX by
// default) goes as several MPI messages (pieces), each at most that long.
// Tests lower the limit to reach the split with small buffers.
//
// Open MPI slows down sharply (worse than linearly) with thousands of posted,
// unmatched sends, which the ring posts when segments are small. So at most
// kMaxSendPiecesInFlight pieces per (peer, tag) are posted at a time; the
// rest wait in order and are posted as earlier ones complete, during any
// wait() on this transport. Receives are posted at once. Every wait() polls
// all of the transport's sends, so a queued send never waits on a rank that
// is itself blocked in wait(). The transport must outlive its transfers.
//
// Open MPI 4.1 truncates an overlong message a rank sends to itself without
// reporting an error, so a receive from oneself only detects a message that
// is too short.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <mpi.h>

#include "collectives/transport.h"

namespace herd::collectives {

constexpr std::size_t kMaxMpiMessageBytes = INT_MAX;
// Posted, not yet completed send pieces per (peer, tag); see above.
constexpr int64_t kMaxSendPiecesInFlight = 256;

namespace detail {
class MpiSendQueues;
}  // namespace detail

class MpiTransport final : public Transport {
 public:
  // Sets MPI_ERRORS_RETURN on `comm`, so that failures come back as Status.
  explicit MpiTransport(MPI_Comm comm, std::size_t max_message_bytes = kMaxMpiMessageBytes);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::unique_ptr<PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) override;
  std::unique_ptr<PendingTransfer> irecv(void* data, std::size_t bytes, int peer, int tag) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::size_t max_message_bytes_;
  std::unique_ptr<detail::MpiSendQueues> send_queues_;
};

// "MPI_Isend: MPI_ERR_RANK: invalid rank" for an MPI error code.
std::string mpi_error_string(const char* call, int code);

}  // namespace herd::collectives
