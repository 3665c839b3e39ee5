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
// Eager pieces: Open MPI sends a message up to its eager limit (4 KiB with the
// shared-memory transport, header included) at once, and a longer one through
// a rendezvous (a handshake and a single copy by the kernel), which costs more
// than the whole eager message. With eager_piece_bytes = E > 0,
// a message of more than E and at most kEagerSplitPieces * E bytes goes as
// pieces of E bytes (the last one shorter), so it is eager; longer messages
// keep one piece, where the single copy wins. E comes from
// agree_eager_piece_bytes() (eager_limit.h); sender and receiver must use the
// same.
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

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <mpi.h>

#include "collectives/transport.h"

namespace herd::collectives {

constexpr std::size_t kMaxMpiMessageBytes = INT_MAX;
// Posted, not yet completed send pieces per (peer, tag); see above.
constexpr int64_t kMaxSendPiecesInFlight = 256;
// Most pieces a message is cut into to stay under the eager limit: two eager
// pieces beat one rendezvous message, four no longer do
// (docs/design/mpi-transport.md).
constexpr std::size_t kEagerSplitPieces = 2;

namespace detail {
class MpiSendQueues;
}  // namespace detail

class MpiTransport final : public Transport {
 public:
  // Sets MPI_ERRORS_RETURN on `comm`, so that failures come back as Status.
  // A failed setup call (an invalid communicator) throws herd::Error.
  explicit MpiTransport(MPI_Comm comm, std::size_t max_message_bytes = kMaxMpiMessageBytes,
                        std::size_t eager_piece_bytes = 0);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // The eager piece size the transport cuts messages with; 0: none.
  std::size_t eager_piece_bytes() const { return eager_piece_bytes_; }
  // A wait in which nothing moved for `timeout` fails, naming the peer it
  // waits for (HERD_COLLECTIVE_TIMEOUT); 0, the default, waits for ever.
  // Applies to transfers posted after the call.
  void set_collective_timeout(std::chrono::milliseconds timeout) { collective_timeout_ = timeout; }
  std::unique_ptr<PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) override;
  std::unique_ptr<PendingTransfer> irecv(void* data, std::size_t bytes, int peer, int tag) override;

 private:
  // The most bytes of one MPI message in a transfer of `bytes` bytes.
  std::size_t piece_bytes_for(std::size_t bytes) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::size_t max_message_bytes_;
  std::size_t eager_piece_bytes_;
  std::chrono::milliseconds collective_timeout_{0};
  std::unique_ptr<detail::MpiSendQueues> send_queues_;
};

// How many of `comm`'s ranks share this rank's machine (MPI_COMM_TYPE_SHARED).
// Collective over `comm`; a failed MPI call throws herd::Error
// (HERD_MPI_CHECK, mpi_check.h).
int ranks_on_this_machine(MPI_Comm comm);

}  // namespace herd::collectives
