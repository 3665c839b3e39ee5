#include "collectives/mpi/fault_notice.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/peer_identity.h"

namespace herd::collectives {
namespace {

// Tags of the notice communicator.
constexpr int kFaultTag = 1;
constexpr int kExitTag = 2;
constexpr int kAnswerTag = 3;

using Clock = std::chrono::steady_clock;

// Never destroyed: notices are sent from herd's static destructor
// (src/api.cc), which may run after this file's would have.
struct Notices {
  std::mutex mutex;
  MPI_Comm comm = MPI_COMM_NULL;
  std::atomic<bool> fault_known{false};
  std::string fault;        // guarded by mutex
  std::string exit_notice;  // guarded by mutex
  // Guarded by mutex: when this rank learned of its fault, and which ranks
  // have sent a fault notice or an answer (this rank counts as heard).
  Clock::time_point fault_learned;
  std::vector<bool> heard;
  // Buffers of posted sends, kept for the life of the process.
  std::deque<std::string> sent;
};
Notices& notices() {
  static Notices* const instance = new Notices;
  return *instance;
}

// Posts `text` to every other rank with `tag`. Holds the mutex.
void send_to_everyone_locked(const std::string& text, int tag) {
  if (notices().comm == MPI_COMM_NULL) return;
  int rank = 0;
  int size = 1;
  if (MPI_Comm_rank(notices().comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(notices().comm, &size) != MPI_SUCCESS) {
    return;
  }
  notices().sent.push_back(text);
  const std::string& buffer = notices().sent.back();
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    // Best effort: a peer that cannot be reached is what the notice is about.
    if (MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, peer, tag,
                  notices().comm, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
}

// Receives every notice that has arrived. Holds the mutex.
void receive_arrived_locked() {
  if (notices().comm == MPI_COMM_NULL) return;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, notices().comm, &arrived, &status) != MPI_SUCCESS ||
        !arrived) {
      return;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string text(static_cast<std::size_t>(std::max(count, 0)), '\0');
    if (MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, notices().comm,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return;
    }
    if ((status.MPI_TAG == kFaultTag || status.MPI_TAG == kAnswerTag) &&
        static_cast<std::size_t>(status.MPI_SOURCE) < notices().heard.size()) {
      notices().heard[static_cast<std::size_t>(status.MPI_SOURCE)] = true;
    }
    if (status.MPI_TAG == kFaultTag && !notices().fault_known.load()) {
      notices().fault = text;
      notices().fault_learned = Clock::now();
      notices().fault_known.store(true);
      send_to_everyone_locked(describe_self(), kAnswerTag);
    } else if (status.MPI_TAG == kExitTag && notices().exit_notice.empty()) {
      notices().exit_notice = text;
    }
  }
}

}  // namespace

void open_fault_notices() {
  std::lock_guard<std::mutex> lock(notices().mutex);
  if (notices().comm != MPI_COMM_NULL) return;
  HERD_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &notices().comm));
  HERD_MPI_CHECK(MPI_Comm_set_errhandler(notices().comm, MPI_ERRORS_RETURN));
  int rank = 0;
  int size = 1;
  HERD_MPI_CHECK(MPI_Comm_rank(notices().comm, &rank));
  HERD_MPI_CHECK(MPI_Comm_size(notices().comm, &size));
  notices().heard.assign(static_cast<std::size_t>(size), false);
  notices().heard[static_cast<std::size_t>(rank)] = true;
}

void close_fault_notices() {
  std::lock_guard<std::mutex> lock(notices().mutex);
  if (notices().comm == MPI_COMM_NULL || notices().fault_known.load()) return;
  HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&notices().comm));
  notices().comm = MPI_COMM_NULL;
  notices().exit_notice.clear();
}

std::string announce_fault(const std::string& text) {
  std::lock_guard<std::mutex> lock(notices().mutex);
  receive_arrived_locked();
  if (notices().fault_known.load()) return notices().fault;
  if (notices().comm == MPI_COMM_NULL) return text;
  notices().fault = fmt::format("{}: {}", describe_self(), text);
  notices().fault_learned = Clock::now();
  notices().fault_known.store(true);
  send_to_everyone_locked(notices().fault, kFaultTag);
  return notices().fault;
}

std::optional<std::string> known_fault() {
  std::lock_guard<std::mutex> lock(notices().mutex);
  receive_arrived_locked();
  if (!notices().fault_known.load()) return std::nullopt;
  return notices().fault;
}

bool fault_known() { return notices().fault_known.load(); }

void announce_exit_without_shutdown() {
  std::lock_guard<std::mutex> lock(notices().mutex);
  send_to_everyone_locked(fmt::format("{} exited without herd::shutdown", describe_self()),
                          kExitTag);
}

std::vector<int> silent_ranks_after_fault(std::chrono::milliseconds patience) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(notices().mutex);
      receive_arrived_locked();
      if (!notices().fault_known.load() || notices().comm == MPI_COMM_NULL) return {};
      std::vector<int> silent;
      for (std::size_t rank = 0; rank < notices().heard.size(); ++rank) {
        if (!notices().heard[rank]) silent.push_back(static_cast<int>(rank));
      }
      if (silent.empty() || Clock::now() >= notices().fault_learned + patience) return silent;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string silent_ranks_note() {
  const std::vector<int> silent = silent_ranks_after_fault(kFaultAnswerPatience);
  if (silent.empty()) return "";
  std::vector<std::string> named;
  named.reserve(silent.size());
  for (int rank : silent) named.push_back(describe_rank(rank));
  return fmt::format("; not heard from within {:.1f} s of the fault (cut off, frozen or gone): {}",
                     std::chrono::duration<double>(kFaultAnswerPatience).count(),
                     fmt::join(named, ", "));
}

std::optional<StopNotice> stop_notice(std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(notices().mutex);
      receive_arrived_locked();
      if (notices().fault_known.load()) return StopNotice{true, notices().fault};
      if (!notices().exit_notice.empty()) return StopNotice{false, notices().exit_notice};
      if (notices().comm == MPI_COMM_NULL) return std::nullopt;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace herd::collectives
