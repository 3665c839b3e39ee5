// BackgroundLoop: the body of the background thread of one process set, on
// one member rank (each set this rank belongs to has its own).
//
// Each cycle it (1) drains newly submitted tensors from the TensorQueue and
// sorts them into "settled by the response cache" and "needs the
// coordinator"; (2) joins one bitwise-AND allreduce (cycle_bits.h) that tells
// every rank which cached names are ready everywhere, which cache slots some
// rank invalidated, whether anyone needs the coordinator, whether anyone is
// shutting down and whether anyone has a stall check due; (3) if needed, sends
// its uncached requests to rank 0, whose Coordinator answers every rank with
// the same ResponseList; (4) plans fusion over the agreed responses (cached
// ones in slot order, then negotiated ones in the coordinator's order: the
// same list on every rank) and executes each group; (5) if a stall check is
// due somewhere, runs the stall round (stall_round.h), which warns or stops
// the set. The loop is the only user of the control channel and the
// transport. herd::join's part of the cycle lives in JoinState (join_state.h).
//
// It ends when any rank asks to shut down, when the stall round finds a tensor
// past HERD_STALL_SHUTDOWN_TIME, or on a fatal error; in each case every
// operation still pending fails with the reason and the queue is closed.
// Nothing thrown inside escapes the thread: it becomes that fatal error.
//
// Cycles run on the background thread, or on an application thread waiting
// for one of the loop's operations (drive_until_done, cycle_driver.h); the
// cycle lock makes sure one runs at a time. Only the background thread
// sleeps between cycles.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/transport.h"
#include "common/status.h"
#include "src/autotune.h"
#include "src/collective_executor.h"
#include "src/config.h"
#include "src/control_channel.h"
#include "src/coordinator.h"
#include "src/cycle_bits.h"
#include "src/cycle_driver.h"
#include "src/fusion_executor.h"
#include "src/gpu_support.h"
#include "src/join_state.h"
#include "src/response_cache.h"
#include "src/stall_round.h"
#include "src/tensor_queue.h"

namespace herd::detail {

class BackgroundLoop final : public CycleDriver,
                             public std::enable_shared_from_this<BackgroundLoop> {
 public:
  // `global_ranks` names the members of this loop's process set by their
  // global ranks (for messages); `stop_reason` is what pending operations
  // fail with when the set stops. `gpu` (null in a build without CUDA) makes
  // the executor of GPU responses, from `gpu_context`, at the first one.
  // `set_id` is the process set's id, its tensors' thread in the timeline.
  // `shm` and `hierarchical`: the set's allreduce paths besides the
  // transport's (FusionExecutor).
  BackgroundLoop(const Config& config, TensorQueue& queue, ControlChannel& control,
                 collectives::Transport& transport, std::vector<int> global_ranks,
                 std::string stop_reason, GpuSupport* gpu = nullptr, GpuSetContext gpu_context = {},
                 ShmPath shm = {}, int set_id = 0, HierarchicalPath hierarchical = {});

  // The thread body. Returns once the loop has stopped and failed everything
  // still pending.
  void run();

  // CycleDriver: runs cycles on the waiting thread; see cycle_driver.h.
  void drive_until_done(const HandleState& handle) override;

  // Asks every rank's loop to stop at the next cycle. Any thread.
  void request_shutdown();

  // herd::join: from the next cycle this rank takes part in the other ranks'
  // allreduces with the identity of each op, until every rank has joined.
  // The handle then completes and *last_rank holds the global rank that
  // joined last. Any thread; one join at a time per rank.
  std::shared_ptr<HandleState> join(int* last_rank);

 private:
  // One agreed response and this rank's entry for it.
  struct Agreed {
    Response response;
    TensorEntry entry;
  };

  // With cycle_mutex_ held: one cycle; if it stops the loop (a shutdown, an
  // error), fails everything pending and sets finished_.
  void run_cycle_locked();
  // With cycle_mutex_ held: runs `step`; if it fails, throws or asks to stop,
  // fails everything pending and sets finished_.
  void run_step_locked(const std::function<Status(bool* stop)>& step);
  // With cycle_mutex_ held: completes the GPU work that has finished.
  void poll_gpu_locked();
  // GPU work is in flight (it completes through poll_gpu, not through an
  // agreement round).
  bool gpu_busy_locked() const { return gpu_executor_ && gpu_executor_->busy(); }
  // Something only an agreement round handles: new submissions, a shutdown
  // or a join of this rank. Another rank's shutdown is seen at the first
  // round after the GPU work: that rank waits in its round until then.
  bool cycle_due_locked();
  [[nodiscard]] Status poll_gpu();
  // Starts an agreed GPU group on the set's GpuExecutor (made here at the
  // first one).
  [[nodiscard]] Status start_gpu(const Response& spec, const std::vector<TensorEntry*>& entries,
                                 Contribution contribution);
  CompleteFn completer();
  // With cycle_mutex_ held: nothing here waits for a cycle, so the background
  // thread may sleep.
  bool idle_locked() const;
  [[nodiscard]] Status run_cycle(bool* stop);
  void classify(TensorEntry entry);
  void requeue_stale_cached_entries();
  // Calls `visit` on every entry of this rank that waits for the other ranks.
  void for_each_pending(const std::function<void(TensorEntry&)>& visit);
  // At `now`, `entry` has waited past the stall check and no warning has
  // named it yet; it has waited past the stall shutdown.
  bool warning_due(const TensorEntry& entry, std::chrono::steady_clock::time_point now) const;
  bool shutdown_due(const TensorEntry& entry, std::chrono::steady_clock::time_point now) const;
  // What the stall round reports about `entry` at `now`.
  PendingTensor pending_tensor(const TensorEntry& entry,
                               std::chrono::steady_clock::time_point now) const;
  // Some entry here needs a stall round: past the stall check and not yet
  // named by a warning, or past the stall shutdown and not yet judged so.
  bool stall_due(std::chrono::steady_clock::time_point now);
  // The stall round (stall_round.h), on every rank when any has one due: logs
  // rank 0's warning, or stops the set with rank 0's text (*stop, with
  // stall_stop_reason_).
  [[nodiscard]] Status run_stall_round(bool* stop);
  // Rank 0: the verdict over every rank's pending list.
  StallVerdict judge(const std::vector<std::vector<uint8_t>>& pending_lists) const;
  [[nodiscard]] Status negotiate(std::vector<Agreed>* agreed);
  [[nodiscard]] Status coordinate(const std::vector<std::vector<uint8_t>>& request_lists,
                                  ResponseList* responses);
  [[nodiscard]] Status execute(std::vector<Agreed>* agreed);
  // The timeline's readiness marks for cached names, from the per-rank parts
  // of this cycle's agreement (cycle_bits.h): one per rank and occurrence.
  void mark_ready_ranks(const CycleAgreement& agreement);
  // Autotuning: every rank takes rank 0's decision, broadcast after the
  // agreement that announced it, and applies it before the cycle executes.
  [[nodiscard]] Status take_autotune_decision();
  void apply(const TunedSettings& settings);
  TunedSettings tuned_settings() const;
  // Rank 0 while tuning: the scores of `agreed`'s operations, just executed.
  void record_for_autotune(const std::vector<Agreed>& agreed);
  void complete(TensorEntry& entry, const Status& status);
  // While ranks are joined, fails the cached entries other than allreduces.
  void fail_cached_entries_blocked_by_join();
  void fail_everything(const std::string& reason, std::vector<Agreed>* in_flight);

  const Config config_;
  const int set_id_;
  const std::vector<int> global_ranks_;
  const std::string stop_reason_;
  const std::chrono::microseconds cycle_time_;
  // HERD_STALL_CHECK_TIME and HERD_STALL_SHUTDOWN_TIME; zero: off.
  const std::chrono::steady_clock::duration stall_check_;
  const std::chrono::steady_clock::duration stall_shutdown_;
  TensorQueue& queue_;
  ControlChannel& control_;
  FusionExecutor executor_;
  CollectiveExecutor collective_executor_;
  GpuSupport* const gpu_;
  const GpuSetContext gpu_context_;
  std::atomic<bool> shutdown_requested_{false};

  // Held by whichever thread runs a cycle; guards everything below, which
  // only cycles touch.
  std::mutex cycle_mutex_;
  bool finished_ = false;  // the loop has stopped; no more cycles run
  // !idle_locked() after the last cycle, for a driver that leaves without
  // the lock (it then wakes the background thread).
  std::atomic<bool> work_left_{false};
  // gpu_busy_locked() after the last step, for a waiter that finds the lock
  // taken: GPU work completes within microseconds of its event, so such a
  // waiter watches its handle as a GpuWatch does rather than sleep on it.
  std::atomic<bool> gpu_in_flight_{false};

  ResponseCache cache_;
  std::optional<Coordinator> coordinator_;  // rank 0 only

  // This rank's pending entries, by state. A name is in at most one of them.
  std::map<uint32_t, TensorEntry> cached_pending_;  // cache slot -> entry awaiting that slot's bit
  std::vector<TensorEntry> uncached_;               // to send in the next negotiation
  std::unordered_map<std::string, TensorEntry> negotiating_;  // sent, awaiting a response
  std::vector<uint32_t> invalid_slots_;                       // for the next agreement
  bool ran_something_ = false;  // the last agreement executed or negotiated something
  // Some rank writes a timeline: the agreement carries each rank's ready
  // bits. Every rank sets it from the same agreement, a cycle ahead.
  bool per_rank_ready_ = false;
  // Cache slot -> the name it held and the ranks already marked ready for
  // its pending occurrence.
  struct ReadyMarks {
    std::string name;
    std::vector<bool> marked;
  };
  std::unordered_map<uint32_t, ReadyMarks> ready_marks_;
  // The text of a stall round's shutdown: what pending operations fail with,
  // on every rank, instead of stop_reason_.
  std::string stall_stop_reason_;
  std::unique_ptr<GpuExecutor> gpu_executor_;  // made at the first GPU response

  JoinState join_;  // herd::join; request() and requested() from any thread

  // HERD_FUSION_THRESHOLD and HERD_FUSION_MAX_TENSOR_BYTES, as autotuning
  // leaves them.
  int64_t fusion_threshold_bytes_;
  int64_t fusion_max_tensor_bytes_;
  uint64_t cycles_ = 0;                   // cycles run: the same count on every rank
  std::unique_ptr<Autotuner> autotuner_;  // HERD_AUTOTUNE, global set only
};

}  // namespace herd::detail
