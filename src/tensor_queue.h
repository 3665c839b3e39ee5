// TensorQueue: the hand-off between application threads and the background
// thread.
//
// Application threads push() TensorEntries (any number of threads at once);
// the background thread drain()s them each cycle and calls finish() when a
// name's operation has completed. The queue also enforces "one pending
// operation per name per rank": a name is pending from push() until finish().
// Once closed (shutdown, or a fatal error in the background thread) every
// push fails with the closing reason. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "herd/tensor.h"
#include "herd/types.h"
#include "src/handle_state.h"
#include "src/message.h"

namespace herd::detail {

// One submitted operation as the background thread sees it.
struct TensorEntry {
  Request request;  // what this rank asks every rank to agree on
  TensorView input;
  TensorView output;
  std::shared_ptr<HandleState> handle;
  // Results whose size the negotiation decides (allgather, alltoall,
  // reducescatter) go here, allocated by the background thread.
  Tensor* output_tensor = nullptr;
  std::vector<int64_t>* received_splits = nullptr;  // alltoall, optional
  std::vector<TensorView> group_inputs;             // grouped allreduce
  std::vector<TensorView> group_outputs;
  // A joined rank's stand-in for a tensor it never submitted: holds the
  // identity of the op, and no handle waits on it.
  std::unique_ptr<uint8_t[]> owned_storage;
  // A GPU entry's readiness: a cudaEvent_t recorded on the producer's stream
  // at submission (GpuSupport::record_ready), destroyed with the last copy.
  std::shared_ptr<void> ready_event;
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
  // When its algorithm's run started (unset before), and whether its
  // completion counts that run in herd::stats(): the first entry with a
  // handle of each fused group.
  std::chrono::steady_clock::time_point run_started{};
  bool counts_run = false;
  // The stall round (stall_round.h) warned about it already, and judged it
  // past HERD_STALL_SHUTDOWN_TIME already: each raises the round's bit once.
  bool stall_reported = false;
  bool stall_shutdown_judged = false;
};

class TensorQueue {
 public:
  // `rank_label` is this rank's global rank, for messages.
  explicit TensorQueue(int rank_label = 0) : rank_label_(rank_label) {}

  // Fails when the name is already pending on this rank, or the queue is closed.
  // `wake_waiter` false leaves a thread asleep in wait_for_work asleep (the
  // submitter drives the cycle itself: blocking_call.h).
  [[nodiscard]] Status push(TensorEntry entry, bool wake_waiter = true);

  // Everything pushed since the last drain, in push order.
  std::vector<TensorEntry> drain();

  // Sleeps until an entry is waiting, wake() is called, or `timeout` passes;
  // polls for the first `spin` of it instead of sleeping (spin_wait.h).
  void wait_for_work(std::chrono::microseconds timeout,
                     std::chrono::microseconds spin = std::chrono::microseconds{0});
  void wake();
  // Whether an entry waits to be drained (also one pushed without waking) or
  // wake() was called; any thread.
  bool has_work();

  // The name may be submitted again.
  void finish(const std::string& name);

  // Later pushes fail with `reason`. Returns the entries never drained.
  std::vector<TensorEntry> close(const std::string& reason);

 private:
  const int rank_label_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::vector<TensorEntry> entries_;
  std::unordered_set<std::string> pending_names_;
  bool woken_ = false;
  // woken_ || !entries_.empty(), readable without the mutex, for the poll.
  std::atomic<bool> has_work_{false};
  bool closed_ = false;
  std::string close_reason_;
};

}  // namespace herd::detail
