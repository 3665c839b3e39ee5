// MPI point-to-point transport; see mpi_transport.h.
//
// Used by one thread at a time (the runtime's background thread).
//
// Pieces: a transfer of `bytes` bytes goes as num_pieces MPI messages of
// MPI_BYTE with one peer and tag; with P = piece_bytes_for(bytes) (the
// message limit, or the eager piece size), piece i covers bytes [i * P,
// min(bytes, (i + 1) * P)), and a zero-byte transfer is one
// empty piece so that it is still delivered. MPI keeps the messages of one
// (source, tag, communicator) in order, so piece i of a send matches piece i
// of the receive.
//
// Streams: the sends of one (peer, tag) form a stream, a FIFO of pieces in
// posting order. At most kMaxSendPiecesInFlight of a stream's pieces are
// posted and not yet completed; the next ones are posted as the oldest
// complete. Receives post all their pieces at once (Open MPI handles many
// posted receives well, many posted sends badly).
//
// Progress: wait() never blocks inside MPI. It polls: every stream's oldest
// in-flight piece with MPI_Test, refilling the streams, and then its own
// oldest piece. So while any transfer is waited on, every queued send keeps
// being posted. Between fruitless polls it spins, then yields, then sleeps
// with growing pauses (collectives/poll_backoff.h), so that with more ranks
// than cores the peer it waits for can run and a long wait costs little CPU.
// Once it sleeps it also looks for fault notices (fault_notice.h), failing at
// once with the first fault it learns of, and fails on its own once nothing
// has moved for the collective timeout (set_collective_timeout), naming the
// peer; every failure of a wait is announced to the other ranks.
//
// Every MPI return code is checked (mpi_check.h) and turned into a Status
// naming the call, the file and line and MPI's text.
#include "collectives/mpi/mpi_transport.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collectives/mpi/fault_notice.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/peer_identity.h"
#include "collectives/poll_backoff.h"
#include "common/enforce.h"

namespace herd::collectives {
namespace detail {

enum class Direction {
  kSend,
  kReceive,
};

// One send or receive. Pieces [0, completed_) are done, [completed_,
// posted_) are posted, [posted_, planned_) wait to be posted. The first
// failure is kept in status_ and ends the transfer: nothing more is posted
// (planned_ becomes posted_), and a receive cancels its posted pieces.
class MpiTransfer final : public PendingTransfer {
 public:
  MpiTransfer(Direction direction, unsigned char* data, std::size_t bytes,
              std::size_t max_piece_bytes, MPI_Comm comm, int rank, int peer, int tag,
              MpiSendQueues& send_queues, std::chrono::milliseconds timeout)
      : direction_(direction),
        data_(data),
        bytes_(bytes),
        max_piece_bytes_(max_piece_bytes),
        comm_(comm),
        rank_(rank),
        peer_(peer),
        tag_(tag),
        send_queues_(send_queues),
        timeout_(timeout),
        num_pieces_(bytes == 0 ? 1
                               : static_cast<int64_t>(bytes / max_piece_bytes +
                                                      (bytes % max_piece_bytes != 0 ? 1 : 0))),
        planned_(num_pieces_),
        requests_(static_cast<std::size_t>(num_pieces_), MPI_REQUEST_NULL) {}

  ~MpiTransfer() override {
    if (!waited_) (void)wait();
  }

  Status wait() override;

  int peer() const { return peer_; }
  int tag() const { return tag_; }
  bool finished() const { return completed_ == planned_; }
  bool has_unposted_piece() const { return posted_ < planned_; }
  bool has_piece_in_flight() const { return completed_ < posted_; }
  bool in_send_queue = false;  // set and cleared by MpiSendQueues

  // Posts piece posted_ (there must be one); false if MPI refused it.
  bool post_next_piece() {
    const std::size_t offset = static_cast<std::size_t>(posted_) * max_piece_bytes_;
    const int count = static_cast<int>(piece_bytes(posted_));
    MPI_Request* request = &requests_[static_cast<std::size_t>(posted_)];
    const Status posted = direction_ == Direction::kSend
                              ? HERD_MPI_STATUS(MPI_Isend(data_ + offset, count, MPI_BYTE, peer_,
                                                          tag_, comm_, request))
                              : HERD_MPI_STATUS(MPI_Irecv(data_ + offset, count, MPI_BYTE, peer_,
                                                          tag_, comm_, request));
    if (!posted.is_ok()) {
      fail(describe() + posted.message());
      return false;
    }
    ++posted_;
    return true;
  }

  // Tests piece completed_ (which must be in flight); true if it is no longer
  // in flight, done or failed.
  bool complete_next_piece() {
    const int64_t piece = completed_;
    int done = 0;
    MPI_Status status;
    const Status tested =
        HERD_MPI_STATUS(MPI_Test(&requests_[static_cast<std::size_t>(piece)], &done, &status));
    if (!tested.is_ok()) {
      ++completed_;
      fail(describe() + fmt::format("piece {} of {}: ", piece, num_pieces_) + tested.message());
      return true;
    }
    if (!done) return false;
    ++completed_;
    if (direction_ == Direction::kReceive) check_received(piece, status);
    return true;
  }

 private:
  std::size_t piece_bytes(int64_t piece) const {
    const std::size_t offset = static_cast<std::size_t>(piece) * max_piece_bytes_;
    return std::min(max_piece_bytes_, bytes_ - offset);
  }

  // "MPI recv of 12 bytes from rank 1 to rank 0 with tag 5: "
  std::string describe() const {
    return direction_ == Direction::kSend
               ? fmt::format("MPI send of {} bytes from rank {} to rank {} with tag {}: ", bytes_,
                             rank_, peer_, tag_)
               : fmt::format("MPI recv of {} bytes from rank {} to rank {} with tag {}: ", bytes_,
                             peer_, rank_, tag_);
  }

  // A sender's message of another length shows up as a piece whose received
  // count differs from the count it was posted for.
  void check_received(int64_t piece, MPI_Status& status) {
    int received = 0;
    const Status counted = HERD_MPI_STATUS(MPI_Get_count(&status, MPI_BYTE, &received));
    if (!counted.is_ok()) {
      fail(describe() + counted.message());
      return;
    }
    const std::size_t expected = piece_bytes(piece);
    if (received != MPI_UNDEFINED && static_cast<std::size_t>(received) == expected) return;
    if (num_pieces_ == 1) {
      fail(describe() +
           fmt::format("expected {} bytes, got a message of {} bytes", bytes_, received));
    } else {
      fail(describe() + fmt::format("piece {} of {} expected {} bytes, got a message of {} bytes",
                                    piece, num_pieces_, expected, received));
    }
  }

  void fail(std::string message) {
    if (status_.is_ok()) status_ = Status::error(std::move(message));
    planned_ = posted_;
    if (direction_ == Direction::kReceive) cancel_posted_pieces();
  }

  // After a timeout or a fault the transfer gives up on its sends still in
  // flight (a send cannot be cancelled): the job is over, and its requests
  // are left to MPI.
  void abandon_posted_sends() {
    if (direction_ == Direction::kSend) completed_ = posted_;
  }

  // A cancelled receive that no message has matched completes at once; one
  // whose message is partly received (over TCP, a peer cut off in the middle
  // of it) cannot be cancelled and may never complete. So completion is
  // awaited for at most kCancelWait per receive, then the request is left to
  // MPI: the job is over then (a timeout or a fault). The transfer has failed
  // already and this may run in its destructor, so a failure here is logged,
  // not returned.
  void cancel_posted_pieces() {
    constexpr std::chrono::milliseconds kCancelWait{100};
    for (int64_t piece = completed_; piece < posted_; ++piece) {
      MPI_Request& request = requests_[static_cast<std::size_t>(piece)];
      const Status cancelled = HERD_MPI_STATUS(MPI_Cancel(&request));
      if (!cancelled.is_ok()) {
        ::herd::detail::warn_if_failed(cancelled);
        continue;
      }
      const auto deadline = std::chrono::steady_clock::now() + kCancelWait;
      int done = 0;
      while (!done && std::chrono::steady_clock::now() < deadline) {
        const Status tested = HERD_MPI_STATUS(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        if (!tested.is_ok()) {
          ::herd::detail::warn_if_failed(tested);
          break;
        }
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    completed_ = posted_;
  }

  const Direction direction_;
  unsigned char* const data_;
  const std::size_t bytes_;
  const std::size_t max_piece_bytes_;
  const MPI_Comm comm_;
  const int rank_;
  const int peer_;
  const int tag_;
  MpiSendQueues& send_queues_;
  const std::chrono::milliseconds timeout_;  // 0: wait for ever
  const int64_t num_pieces_;
  int64_t planned_;
  int64_t posted_ = 0;
  int64_t completed_ = 0;
  std::vector<MPI_Request> requests_;  // by piece
  bool waited_ = false;
  Status status_;
};

// The send streams of one MpiTransport, keyed by (peer, tag).
class MpiSendQueues {
 public:
  // Appends `send` to its stream and posts what the stream's window allows.
  void add(MpiTransfer* send) {
    Stream& stream = streams_[{send->peer(), send->tag()}];
    send->in_send_queue = true;
    stream.sends.push_back(send);
    fill(stream);
  }

  // Drops a finished send still in its stream (one that failed before its
  // turn came); a no-op when progress() already dropped it.
  void remove(MpiTransfer* send) {
    if (!send->in_send_queue) return;
    Stream& stream = streams_[{send->peer(), send->tag()}];
    auto it = std::find(stream.sends.begin(), stream.sends.end(), send);
    HERD_ENFORCE(it != stream.sends.end());
    const auto index = static_cast<std::size_t>(it - stream.sends.begin());
    stream.sends.erase(it);
    if (index < stream.next_to_post) --stream.next_to_post;
    send->in_send_queue = false;
  }

  // Completes the oldest in-flight pieces of every stream, drops finished
  // sends and refills the windows. True if anything moved.
  bool progress() {
    bool moved = false;
    for (auto& entry : streams_) {
      Stream& stream = entry.second;
      while (!stream.sends.empty()) {
        MpiTransfer* oldest = stream.sends.front();
        if (oldest->finished()) {
          oldest->in_send_queue = false;
          stream.sends.pop_front();
          if (stream.next_to_post > 0) --stream.next_to_post;
          moved = true;
          continue;
        }
        if (!oldest->has_piece_in_flight() || !oldest->complete_next_piece()) break;
        --stream.in_flight;
        moved = true;
      }
      moved = fill(stream) || moved;
    }
    return moved;
  }

 private:
  // A FIFO of pieces: sends[0..next_to_post) have all their pieces posted,
  // and in_flight of those pieces have not completed.
  struct Stream {
    std::deque<MpiTransfer*> sends;
    std::size_t next_to_post = 0;
    int64_t in_flight = 0;
  };

  // Posts pieces in order while the window has room. True if any was posted.
  bool fill(Stream& stream) {
    bool posted = false;
    while (stream.in_flight < kMaxSendPiecesInFlight && stream.next_to_post < stream.sends.size()) {
      MpiTransfer* send = stream.sends[stream.next_to_post];
      if (!send->has_unposted_piece()) {
        ++stream.next_to_post;
        continue;
      }
      if (send->post_next_piece()) ++stream.in_flight;
      posted = true;
    }
    return posted;
  }

  std::map<std::pair<int, int>, Stream> streams_;
};

// Polls until every piece is done (see Progress at the top of the file).
Status MpiTransfer::wait() {
  if (waited_) return status_;
  waited_ = true;
  PollBackoff backoff;
  PollBackoff::Clock::time_point next_liveness_check{};
  while (!finished()) {
    bool moved = send_queues_.progress();
    if (direction_ == Direction::kReceive) {
      while (has_piece_in_flight() && complete_next_piece()) moved = true;
    }
    if (moved || finished()) {
      backoff.after_progress();
      continue;
    }
    if (!backoff.after_fruitless_poll()) continue;
    if (const std::optional<std::string> fault = known_fault()) {
      fail(describe() + "stopped: " + *fault);
      abandon_posted_sends();
      break;
    }
    const PollBackoff::Clock::time_point now = PollBackoff::Clock::now();
    if (now >= next_liveness_check) {
      next_liveness_check = now + kPeerLivenessInterval;
      if (peer_process_gone(comm_, peer_)) {
        fail(describe() + fmt::format("{} exited (its process is gone) while this rank waited "
                                      "for it",
                                      describe_peer(comm_, peer_)));
        abandon_posted_sends();
        break;
      }
    }
    if (timeout_.count() > 0 && backoff.idle_for() > timeout_) {
      fail(describe() +
           fmt::format("no progress for {:.1f} s (HERD_COLLECTIVE_TIMEOUT) waiting for {} to {}",
                       std::chrono::duration<double>(timeout_).count(), describe_peer(comm_, peer_),
                       direction_ == Direction::kSend ? "receive" : "send"));
      abandon_posted_sends();
      break;
    }
  }
  send_queues_.remove(this);
  // A failure here (a timeout, a peer gone, an MPI error) ends the job: tell
  // the other ranks, unless it came from their notice.
  if (!status_.is_ok()) (void)announce_fault(status_.message());
  return status_;
}

}  // namespace detail

int ranks_on_this_machine(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  HERD_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int node_ranks = 0;
  const Status sized = HERD_MPI_STATUS(MPI_Comm_size(node, &node_ranks));
  const Status freed = HERD_MPI_STATUS(MPI_Comm_free(&node));
  ::herd::detail::throw_if_failed(sized);
  ::herd::detail::throw_if_failed(freed);
  return node_ranks;
}

MpiTransport::MpiTransport(MPI_Comm comm, std::size_t max_message_bytes,
                           std::size_t eager_piece_bytes)
    : comm_(comm),
      max_message_bytes_(max_message_bytes),
      eager_piece_bytes_(eager_piece_bytes),
      send_queues_(std::make_unique<detail::MpiSendQueues>()) {
  HERD_ENFORCE_GE(max_message_bytes_, std::size_t{1});
  HERD_ENFORCE_LE(max_message_bytes_, kMaxMpiMessageBytes);
  HERD_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  HERD_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  HERD_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiTransport::~MpiTransport() = default;

std::size_t MpiTransport::piece_bytes_for(std::size_t bytes) const {
  const bool eager_split = eager_piece_bytes_ > 0 && bytes > eager_piece_bytes_ &&
                           bytes <= kEagerSplitPieces * eager_piece_bytes_;
  return eager_split ? std::min(eager_piece_bytes_, max_message_bytes_) : max_message_bytes_;
}

std::unique_ptr<PendingTransfer> MpiTransport::isend(const void* data, std::size_t bytes, int peer,
                                                     int tag) {
  // MPI_Isend only reads the buffer; the transfer keeps one pointer type.
  auto* first = static_cast<unsigned char*>(const_cast<void*>(data));
  auto send = std::make_unique<detail::MpiTransfer>(detail::Direction::kSend, first, bytes,
                                                    piece_bytes_for(bytes), comm_, rank_, peer, tag,
                                                    *send_queues_, collective_timeout_);
  send_queues_->add(send.get());
  return send;
}

std::unique_ptr<PendingTransfer> MpiTransport::irecv(void* data, std::size_t bytes, int peer,
                                                     int tag) {
  auto receive = std::make_unique<detail::MpiTransfer>(
      detail::Direction::kReceive, static_cast<unsigned char*>(data), bytes, piece_bytes_for(bytes),
      comm_, rank_, peer, tag, *send_queues_, collective_timeout_);
  while (receive->has_unposted_piece()) {
    if (!receive->post_next_piece()) break;
  }
  return receive;
}

}  // namespace herd::collectives
