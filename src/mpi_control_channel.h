// MpiControlChannel: the ControlChannel of a process set over MPI.
//
// ProcessSetState makes one per set on a communicator of the set's own (an
// MPI_Comm_dup of the set's members), so that the negotiation's messages
// never meet the set's data transfers, another set's or the application's.
// Every MPI call is checked (collectives/mpi/mpi_check.h): a failure comes
// back as Status with the call, file and line and MPI's error text.
//
// Every wait polls, pausing more and more between polls
// (collectives/poll_backoff.h), and fails once no message has come for the
// collective timeout (HERD_COLLECTIVE_TIMEOUT), naming the rank it waits for
// as "rank N (host H, pid P)", or at once when another rank's fault notice
// arrives (collectives/mpi/fault_notice.h). An idle rank's background thread
// joins a round every cycle, so a round without progress for that long
// means that a peer's herd is frozen, dead or cut off, not merely busy.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

#include "common/status.h"
#include "src/control_channel.h"

namespace herd::detail {

class MpiControlChannel final : public ControlChannel {
 public:
  // Sets MPI_ERRORS_RETURN on `comm`; the caller keeps ownership of it.
  // `collective_timeout` 0 waits for ever. Throws herd::Error when MPI
  // refuses.
  explicit MpiControlChannel(
      MPI_Comm comm, std::chrono::milliseconds collective_timeout = std::chrono::milliseconds{0});

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  [[nodiscard]] Status and_allreduce(std::vector<uint64_t>* words) override;
  [[nodiscard]] Status gather_to_root(const std::vector<uint8_t>& mine,
                                      std::vector<std::vector<uint8_t>>* per_rank) override;
  [[nodiscard]] Status broadcast_from_root(std::vector<uint8_t>* bytes) override;

 private:
  // Which collective a wait belongs to, for its messages: "rank 1 of 3:
  // <name> of <words> words: " (words < 0: not said). Formatted only when
  // something fails, so that a healthy round allocates nothing for it.
  struct Round {
    const char* name;
    int64_t words;
  };
  std::string describe(const Round& round) const;
  // `status`, with the round's text in front when it failed.
  Status in_round(Status status, const Round& round) const;

  // Calls poll(&done, &moved, &waiting_for) until done, pacing the polls;
  // fails on a fault notice or after the timeout without a move, naming
  // waiting_for.
  template <typename Poll>
  [[nodiscard]] Status poll_until_done(Poll&& poll, const Round& round);
  // Waits for the `count` requests; peers[i] is the rank requests[i] waits on.
  [[nodiscard]] Status wait_all(MPI_Request* requests, const int* peers, std::size_t count,
                                const Round& round);
  // Sends to send_to and receives from receive_from (either may be -1: none).
  [[nodiscard]] Status exchange(const void* send, int send_bytes, int send_to, void* receive,
                                int receive_bytes, int receive_from, int tag, const Round& round);
  // Receives the next message of `peer` with `tag`, whatever its length.
  [[nodiscard]] Status receive_any_length(int peer, int tag, std::vector<uint8_t>* bytes,
                                          const Round& round);

  MPI_Comm comm_;
  std::chrono::milliseconds collective_timeout_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<uint64_t> agree_scratch_;  // the partner's words in and_allreduce
};

}  // namespace herd::detail
