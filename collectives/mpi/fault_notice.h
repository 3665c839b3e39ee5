// Fault notices: how a rank that stops tells every other rank why.
//
// When a rank's herd meets a fatal failure (a peer that timed out, died or
// was cut off, an MPI error, or the application's herd::fail), it records
// the failure as this process's fault and sends it, best effort, to every
// other rank on a communicator of its own (a duplicate of MPI_COMM_WORLD,
// made by herd::init). Every wait of herd for other ranks (the MPI
// transport, the control channel, the shared-memory allreduce) looks for
// notices once it has waited a while (PollBackoff) and fails at once with
// the first fault it learns of, so that a rank waiting on a failed rank
// learns why instead of timing out. The first fault wins: a later one, here
// or received, is not recorded. A fault stays for the life of the process:
// herd cannot start again after one.
//
// A rank whose process exits without herd::shutdown sends an exit notice
// instead (not a fault: the ranks still shut down together); the others then
// name it in the failure of what was pending (stop_notice()). So do they name
// a rank that shut down after its fault (herd::fail), whose shutdown can
// reach a peer as a plain one before that peer's wait sees the notice.
//
// Every rank that learns of a fault from a notice answers every other rank
// once (a rank with a fault of its own has sent it, which counts as its
// answer), so that a rank can tell which ranks it still reaches: those not
// heard from shortly after the fault are cut off, frozen or gone
// (silent_ranks_note()).
//
// Sends are posted and never waited for (a dead or frozen peer never
// completes them); their buffers live as long as the process. Thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

namespace herd::collectives {

// Makes the notice communicator: collective over MPI_COMM_WORLD. Throws
// herd::Error when MPI fails. Until then (programs that use the transports
// without herd's runtime, such as the collectives' own tests) nothing is
// recorded, sent or received.
void open_fault_notices();
// Frees the communicator, unless a fault is known (then sends may still be
// pending on it, and MPI is not finalized anyway).
void close_fault_notices();

// Records `text` as this rank's fault unless one is known already, and sends
// "<this rank>: <text>" to every other rank. Returns the fault that is now
// known (`text` with this rank's name in front, or the earlier one).
std::string announce_fault(const std::string& text);

// The first fault known to this process, its own or one a peer sent (looks
// for notices that have arrived); nullopt when there is none.
std::optional<std::string> known_fault();
// Whether a fault is known, without looking for new notices (no MPI call).
bool fault_known();

// Tells every other rank that this process exits without herd::shutdown.
void announce_exit_without_shutdown();
// Why a peer shut down: the first fault known (`fault` set), else the first
// exit notice received ("rank 1 (host h, pid p) exited without
// herd::shutdown"), looking for new notices for up to `patience`.
struct StopNotice {
  bool fault = false;
  std::string text;
};
std::optional<StopNotice> stop_notice(std::chrono::milliseconds patience);

// How long after learning of a fault a rank waits for the others' answers.
inline constexpr std::chrono::milliseconds kFaultAnswerPatience{1000};

// The ranks (of MPI_COMM_WORLD) that neither sent a fault notice nor
// answered one since this rank learned of its fault, waiting until every
// rank has or until `patience` has passed since then. Empty when no fault is
// known.
std::vector<int> silent_ranks_after_fault(std::chrono::milliseconds patience);
// "; not heard from within 1.0 s of the fault (cut off, frozen or gone): rank
// 2 (host h, pid p), rank 3 (host h, pid q)" for silent_ranks_after_fault(
// kFaultAnswerPatience), or "" when every rank was heard from or no fault is
// known.
std::string silent_ranks_note();

}  // namespace herd::collectives
