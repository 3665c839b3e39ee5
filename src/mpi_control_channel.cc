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

std::string MpiControlChannel::describe(const Round& round) const {
  return fmt::format("rank {} of {}: {}{}: ", rank_, size_, round.name,
                     round.words >= 0 ? fmt::format(" of {} words", round.words) : "");
}

Status MpiControlChannel::in_round(Status status, const Round& round) const {
  if (status.is_ok()) return status;
  return status.with_context(describe(round));
}

template <typename Poll>
Status MpiControlChannel::poll_until_done(Poll&& poll, const Round& round) {
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
      return Status::error(fmt::format("{}stopped: {}", describe(round), *fault));
    }
    const auto now = collectives::PollBackoff::Clock::now();
    if (waiting_for >= 0 && now >= next_liveness_check) {
      next_liveness_check = now + collectives::kPeerLivenessInterval;
      if (collectives::peer_process_gone(comm_, waiting_for)) {
        const std::string message =
            fmt::format("{}{} exited (its process is gone) while this rank waited for it",
                        describe(round), collectives::describe_peer(comm_, waiting_for));
        collectives::announce_fault(message);
        return Status::error(message);
      }
    }
    if (collective_timeout_.count() > 0 && backoff.idle_for() > collective_timeout_) {
      const std::string message =
          fmt::format("{}no progress for {:.1f} s (HERD_COLLECTIVE_TIMEOUT) waiting for {}",
                      describe(round), std::chrono::duration<double>(collective_timeout_).count(),
                      collectives::describe_peer(comm_, waiting_for));
      collectives::announce_fault(message);
      return Status::error(message);
    }
  }
}

Status MpiControlChannel::wait_all(MPI_Request* requests, const int* peers, std::size_t count,
                                   const Round& round) {
  std::size_t next = 0;  // requests [0, next) are done
  return poll_until_done(
      [&](bool* done, bool* moved, int* waiting_for) {
        while (next < count) {
          int complete = 0;
          HERD_RETURN_IF_ERROR(in_round(
              HERD_MPI_STATUS(MPI_Test(&requests[next], &complete, MPI_STATUS_IGNORE)), round));
          if (!complete) break;
          ++next;
          *moved = true;
        }
        *done = next == count;
        if (!*done) *waiting_for = peers[next];
        return Status::ok();
      },
      round);
}

Status MpiControlChannel::exchange(const void* send, int send_bytes, int send_to, void* receive,
                                   int receive_bytes, int receive_from, int tag,
                                   const Round& round) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int peers[2] = {-1, -1};
  std::size_t count = 0;
  if (receive_from >= 0) {
    peers[count] = receive_from;
    HERD_RETURN_IF_ERROR(
        in_round(HERD_MPI_STATUS(MPI_Irecv(receive, receive_bytes, MPI_BYTE, receive_from, tag,
                                           comm_, &requests[count])),
                 round));
    ++count;
  }
  if (send_to >= 0) {
    peers[count] = send_to;
    HERD_RETURN_IF_ERROR(in_round(HERD_MPI_STATUS(MPI_Isend(send, send_bytes, MPI_BYTE, send_to,
                                                            tag, comm_, &requests[count])),
                                  round));
    ++count;
  }
  return wait_all(requests, peers, count, round);
}

Status MpiControlChannel::receive_any_length(int peer, int tag, std::vector<uint8_t>* bytes,
                                             const Round& round) {
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  HERD_RETURN_IF_ERROR(poll_until_done(
      [&](bool* done, bool*, int* waiting_for) {
        int arrived = 0;
        HERD_RETURN_IF_ERROR(in_round(
            HERD_MPI_STATUS(MPI_Improbe(peer, tag, comm_, &arrived, &message, &status)), round));
        *done = arrived != 0;
        *waiting_for = peer;
        return Status::ok();
      },
      round));
  int count = 0;
  HERD_RETURN_IF_ERROR(in_round(HERD_MPI_STATUS(MPI_Get_count(&status, MPI_BYTE, &count)), round));
  bytes->resize(static_cast<std::size_t>(count));
  MPI_Request request = MPI_REQUEST_NULL;
  HERD_RETURN_IF_ERROR(in_round(
      HERD_MPI_STATUS(MPI_Imrecv(bytes->data(), count, MPI_BYTE, &message, &request)), round));
  return wait_all(&request, &peer, 1, round);
}

Status MpiControlChannel::and_allreduce(std::vector<uint64_t>* words) {
  const std::size_t bytes = words->size() * sizeof(uint64_t);
  if (bytes > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format(
        "rank {}: control allreduce of {} words exceeds MPI's int count", rank_, words->size()));
  }
  if (size_ == 1) return Status::ok();
  // Runs every cycle: the text for messages is built only on failure, and
  // the partner's words land in a buffer kept between cycles.
  const Round round{"control allreduce", static_cast<int64_t>(words->size())};
  const int count = static_cast<int>(bytes);
  std::vector<uint64_t>& theirs = agree_scratch_;
  theirs.resize(words->size());
  const auto and_theirs = [&] {
    for (std::size_t i = 0; i < words->size(); ++i) (*words)[i] &= theirs[i];
  };
  int p2 = 1;
  while (p2 * 2 <= size_) p2 *= 2;
  if (rank_ >= p2) {
    // Hand the words to rank - p2 and take the result from it.
    HERD_RETURN_IF_ERROR(
        exchange(words->data(), count, rank_ - p2, nullptr, 0, -1, kAgreeTag, round));
    return exchange(nullptr, 0, -1, words->data(), count, rank_ - p2, kAgreeTag, round);
  }
  if (rank_ + p2 < size_) {
    HERD_RETURN_IF_ERROR(
        exchange(nullptr, 0, -1, theirs.data(), count, rank_ + p2, kAgreeTag, round));
    and_theirs();
  }
  for (int mask = 1; mask < p2; mask *= 2) {
    const int partner = rank_ ^ mask;
    HERD_RETURN_IF_ERROR(
        exchange(words->data(), count, partner, theirs.data(), count, partner, kAgreeTag, round));
    and_theirs();
  }
  if (rank_ + p2 < size_) {
    HERD_RETURN_IF_ERROR(
        exchange(words->data(), count, rank_ + p2, nullptr, 0, -1, kAgreeTag, round));
  }
  return Status::ok();
}

Status MpiControlChannel::gather_to_root(const std::vector<uint8_t>& mine,
                                         std::vector<std::vector<uint8_t>>* per_rank) {
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(fmt::format("rank {}: request list of {} bytes exceeds MPI's int count",
                                     rank_, mine.size()));
  }
  const Round round{"gathering request lists", -1};
  if (rank_ != 0) {
    return exchange(mine.data(), static_cast<int>(mine.size()), 0, nullptr, 0, -1, kGatherTag,
                    round);
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
          HERD_RETURN_IF_ERROR(in_round(
              HERD_MPI_STATUS(MPI_Improbe(r, kGatherTag, comm_, &found, &messages[r], &status)),
              round));
          if (!found) {
            if (*waiting_for < 0) *waiting_for = r;
            continue;
          }
          int count = 0;
          HERD_RETURN_IF_ERROR(
              in_round(HERD_MPI_STATUS(MPI_Get_count(&status, MPI_BYTE, &count)), round));
          (*per_rank)[r].resize(static_cast<std::size_t>(count));
          receives.push_back(MPI_REQUEST_NULL);
          peers.push_back(r);
          HERD_RETURN_IF_ERROR(
              in_round(HERD_MPI_STATUS(MPI_Imrecv((*per_rank)[r].data(), count, MPI_BYTE,
                                                  &messages[r], &receives.back())),
                       round));
          arrived[r] = true;
          --pending;
          *moved = true;
        }
        *done = pending == 0;
        return Status::ok();
      },
      round));
  return wait_all(receives.data(), peers.data(), receives.size(), round);
}

Status MpiControlChannel::broadcast_from_root(std::vector<uint8_t>* bytes) {
  if (bytes->size() > static_cast<std::size_t>(INT_MAX)) {
    return Status::error(
        fmt::format("response list of {} bytes exceeds MPI's int count", bytes->size()));
  }
  const Round round{"broadcasting the response list", -1};
  // Binomial tree: rank r takes the bytes from r minus its lowest set bit,
  // then passes them to r + m for each lower power of two m.
  int mask = 1;
  while (mask < size_) {
    if (rank_ & mask) {
      HERD_RETURN_IF_ERROR(receive_any_length(rank_ - mask, kBroadcastTag, bytes, round));
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
        in_round(HERD_MPI_STATUS(MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE,
                                           rank_ + mask, kBroadcastTag, comm_, &sends.back())),
                 round));
  }
  return wait_all(sends.data(), peers.data(), sends.size(), round);
}

}  // namespace herd::detail
