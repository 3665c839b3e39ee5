// The control channel's collectives over point-to-point messages, so that
// every wait polls (PollBackoff) instead of blocking inside MPI: a round
// that sees no message for the collective timeout fails naming the rank it
// waits for, and a fault notice from another rank ends it at once
// (collectives/mpi/fault_notice.h). Blocking MPI collectives could do
// neither, and busy-poll while they wait.
//
// and_allreduce: recursive doubling over the largest power of two of ranks;
// each rank beyond it first hands its words to rank - p2, which hands the
// result back at the end. gather_to_root: every rank sends its bytes to rank
// 0, which takes them in any order. broadcast_from_root: a binomial tree
// from rank 0. Receivers of bytes of unknown length probe for the message
// (MPI_Improbe) and receive exactly that (MPI_Imrecv). Each collective has
// its own tag; MPI keeps the messages of one source and tag in order, and
// each round exchanges at most one message per pair and direction, so the
// rounds of successive cycles never mix.
#include "src/mpi_control_channel.h"

#include <climits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "collectives/mpi/fault_notice.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/peer_identity.h"
#include "collectives/poll_backoff.h"

namespace herd::detail {
namespace {

constexpr int kAgreeTag = 1;
constexpr int kGatherTag = 2;
constexpr int kBroadcastTag = 3;

}  // namespace

MpiControlChannel::MpiControlChannel(MPI_Comm comm, std::chrono::milliseconds collective_timeout)
    : comm_(comm), collective_timeout_(collective_timeout) {
  HERD_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  HERD_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  HERD_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

template <typename Poll>
Status MpiControlChannel::poll_until_done(Poll&& poll, const std::string& what) {
  collectives::PollBackoff backoff;
  auto next_liveness_check = collectives::PollBackoff::Clock::time_point{};
  for (;;) {
    bool done = false;
    bool moved = false;
    int waiting_for = -1;
    const Status polled = poll(&done, &moved, &waiting_for);
    if (!polled.is_ok()) {
      // An MPI failure ends the job as a timeout does: tell the others.
      (void)collectives::announce_fault(polled.message());
      return polled;
    }
    if (done) return Status::ok();
    if (moved) {
      backoff.after_progress();
      continue;
    }
    if (!backoff.after_fruitless_poll()) continue;
    if (const std::optional<std::string> fault = collectives::known_fault()) {
      return Status::error(fmt::format("{}stopped: {}", what, *fault));
    }
    const auto now = collectives::PollBackoff::Clock::now();
    if (waiting_for >= 0 && now >= next_liveness_check) {
      next_liveness_check = now + collectives::kPeerLivenessInterval;
      if (collectives::peer_process_gone(comm_, waiting_for)) {
        const std::string message =
            fmt::format("{}{} exited (its process is gone) while this rank waited for it", what,
                        collectives::describe_peer(comm_, waiting_for));
        collectives::announce_fault(message);
        return Status::error(message);
      }
    }
    if (collective_timeout_.count() > 0 && backoff.idle_for() > collective_timeout_) {
      const std::string message =
          fmt::format("{}no progress for {:.1f} s (HERD_COLLECTIVE_TIMEOUT) waiting for {}", what,
                      std::chrono::duration<double>(collective_timeout_).count(),
                      collectives::describe_peer(comm_, waiting_for));
      collectives::announce_fault(message);
      return Status::error(message);
    }
  }
}

Status MpiControlChannel::wait_all(std::vector<MPI_Request>* requests,
                                   const std::vector<int>& peers, const std::string& what) {
  std::size_t next = 0;  // requests [0, next) are done
  return poll_until_done(
      [&](bool* done, bool* moved, int* waiting_for) {
        while (next < requests->size()) {
          int complete = 0;
          HERD_RETURN_IF_ERROR(
              HERD_MPI_STATUS(MPI_Test(&(*requests)[next], &complete, MPI_STATUS_IGNORE))
                  .with_context(what));
          if (!complete) break;
          ++next;
          *moved = true;
        }
        *done = next == requests->size();
        if (!*done) *waiting_for = peers[next];
        return Status::ok();
      },
      what);
}

Status MpiControlChannel::exchange(const void* send, int send_bytes, int send_to, void* receive,
                                   int receive_bytes, int receive_from, int tag,
                                   const std::string& what) {
  std::vector<MPI_Request> requests;
  std::vector<int> peers;
  if (receive_from >= 0) {
    requests.push_back(MPI_REQUEST_NULL);
    peers.push_back(receive_from);
    HERD_RETURN_IF_ERROR(HERD_MPI_STATUS(MPI_Irecv(receive, receive_bytes, MPI_BYTE, receive_from,
                                                   tag, comm_, &requests.back()))
                             .with_context(what));
  }
  if (send_to >= 0) {
    requests.push_back(MPI_REQUEST_NULL);
    peers.push_back(send_to);
    HERD_RETURN_IF_ERROR(HERD_MPI_STATUS(MPI_Isend(send, send_bytes, MPI_BYTE, send_to, tag, comm_,
                                                   &requests.back()))
                             .with_context(what));
  }
  return wait_all(&requests, peers, what);
}

Status MpiControlChannel::receive_any_length(int peer, int tag, std::vector<uint8_t>* bytes,
                                             const std::string& what) {
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  HERD_RETURN_IF_ERROR(poll_until_done(
      [&](bool* done, bool*, int* waiting_for) {
        int arrived = 0;
        HERD_RETURN_IF_ERROR(
            HERD_MPI_STATUS(MPI_Improbe(peer, tag, comm_, &arrived, &message, &status))
                .with_context(what));
        *done = arrived != 0;
        *waiting_for = peer;
        return Status::ok();
      },
      what));
  int count = 0;
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Get_count(&status, MPI_BYTE, &count)).with_context(what));
  bytes->resize(static_cast<std::size_t>(count));
  std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Imrecv(bytes->data(), count, MPI_BYTE, &message, &request[0]))
          .with_context(what));
  return wait_all(&request, {peer}, what);
}

Status MpiControlChannel::and_allreduce(std::vector<uint64_t>* words) {
  const std::size_t bytes = words->size() * sizeof(uint64_t);
  if (bytes > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format(
        "rank {}: control allreduce of {} words exceeds MPI's int count", rank_, words->size()));
  }
  if (size_ == 1) return Status::ok();
  const std::string what =
      fmt::format("rank {} of {}: control allreduce of {} words: ", rank_, size_, words->size());
  const int count = static_cast<int>(bytes);
  std::vector<uint64_t> theirs(words->size());
  const auto and_theirs = [&] {
    for (std::size_t i = 0; i < words->size(); ++i) (*words)[i] &= theirs[i];
  };
  int p2 = 1;
  while (p2 * 2 <= size_) p2 *= 2;
  if (rank_ >= p2) {
    // Hand the words to rank - p2 and take the result from it.
    HERD_RETURN_IF_ERROR(
        exchange(words->data(), count, rank_ - p2, nullptr, 0, -1, kAgreeTag, what));
    return exchange(nullptr, 0, -1, words->data(), count, rank_ - p2, kAgreeTag, what);
  }
  if (rank_ + p2 < size_) {
    HERD_RETURN_IF_ERROR(
        exchange(nullptr, 0, -1, theirs.data(), count, rank_ + p2, kAgreeTag, what));
    and_theirs();
  }
  for (int mask = 1; mask < p2; mask *= 2) {
    const int partner = rank_ ^ mask;
    HERD_RETURN_IF_ERROR(
        exchange(words->data(), count, partner, theirs.data(), count, partner, kAgreeTag, what));
    and_theirs();
  }
  if (rank_ + p2 < size_) {
    HERD_RETURN_IF_ERROR(
        exchange(words->data(), count, rank_ + p2, nullptr, 0, -1, kAgreeTag, what));
  }
  return Status::ok();
}

Status MpiControlChannel::gather_to_root(const std::vector<uint8_t>& mine,
                                         std::vector<std::vector<uint8_t>>* per_rank) {
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format("rank {}: request list of {} bytes exceeds MPI's int count",
                                     rank_, mine.size()));
  }
  const std::string what = fmt::format("rank {} of {}: gathering request lists: ", rank_, size_);
  if (rank_ != 0) {
    return exchange(mine.data(), static_cast<int>(mine.size()), 0, nullptr, 0, -1, kGatherTag,
                    what);
  }
  per_rank->assign(static_cast<std::size_t>(size_), {});
  (*per_rank)[0] = mine;
  // Take the lists as they come: a rank is waited for only when it is late.
  std::vector<MPI_Request> receives;
  std::vector<int> peers;
  std::vector<MPI_Message> messages(static_cast<std::size_t>(size_), MPI_MESSAGE_NULL);
  int pending = size_ - 1;
  std::vector<bool> arrived(static_cast<std::size_t>(size_), false);
  arrived[0] = true;
  HERD_RETURN_IF_ERROR(poll_until_done(
      [&](bool* done, bool* moved, int* waiting_for) {
        for (int r = 1; r < size_; ++r) {
          if (arrived[r]) continue;
          int found = 0;
          MPI_Status status;
          HERD_RETURN_IF_ERROR(
              HERD_MPI_STATUS(MPI_Improbe(r, kGatherTag, comm_, &found, &messages[r], &status))
                  .with_context(what));
          if (!found) {
            if (*waiting_for < 0) *waiting_for = r;
            continue;
          }
          int count = 0;
          HERD_RETURN_IF_ERROR(
              HERD_MPI_STATUS(MPI_Get_count(&status, MPI_BYTE, &count)).with_context(what));
          (*per_rank)[r].resize(static_cast<std::size_t>(count));
          receives.push_back(MPI_REQUEST_NULL);
          peers.push_back(r);
          HERD_RETURN_IF_ERROR(HERD_MPI_STATUS(MPI_Imrecv((*per_rank)[r].data(), count, MPI_BYTE,
                                                          &messages[r], &receives.back()))
                                   .with_context(what));
          arrived[r] = true;
          --pending;
          *moved = true;
        }
        *done = pending == 0;
        return Status::ok();
      },
      what));
  return wait_all(&receives, peers, what);
}

Status MpiControlChannel::broadcast_from_root(std::vector<uint8_t>* bytes) {
  if (bytes->size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(
        fmt::format("response list of {} bytes exceeds MPI's int count", bytes->size()));
  }
  const std::string what =
      fmt::format("rank {} of {}: broadcasting the response list: ", rank_, size_);
  // Binomial tree: rank r takes the bytes from r minus its lowest set bit,
  // then passes them to r + m for each lower power of two m.
  int mask = 1;
  while (mask < size_) {
    if (rank_ & mask) {
      HERD_RETURN_IF_ERROR(receive_any_length(rank_ - mask, kBroadcastTag, bytes, what));
      break;
    }
    mask *= 2;
  }
  std::vector<MPI_Request> sends;
  std::vector<int> peers;
  for (mask /= 2; mask > 0; mask /= 2) {
    if (rank_ + mask >= size_) continue;
    sends.push_back(MPI_REQUEST_NULL);
    peers.push_back(rank_ + mask);
    HERD_RETURN_IF_ERROR(
        HERD_MPI_STATUS(MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE,
                                  rank_ + mask, kBroadcastTag, comm_, &sends.back()))
            .with_context(what));
  }
  return wait_all(&sends, peers, what);
}

}  // namespace herd::detail
