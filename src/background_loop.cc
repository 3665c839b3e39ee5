#include "src/background_loop.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "collectives/mpi/fault_notice.h"
#include "common/enforce.h"
#include "common/logging.h"
#include "common/thread_role.h"
#include "src/cycle_bits.h"
#include "src/fusion_plan.h"
#include "src/operation_stats.h"
#include "src/rank_file_path.h"
#include "src/spin_wait.h"
#include "src/timeline.h"
#include "src/transport_fit.h"

namespace herd::detail {
namespace {

// How a thread with only GPU work in flight watches its events. For the
// first kGpuSpinLimit it looks again at once (yielding the core in between),
// as cudaStreamSynchronize spins: a collective that ends within that time
// completes within a microsecond of its event, where a sleep would add tens
// of microseconds to one that itself takes tens. After that it
// looks every kGpuPollInterval, which costs a longer collective at most
// kGpuPollInterval / kGpuSpinLimit (2.5 %) and frees the core meanwhile.
constexpr std::chrono::microseconds kGpuPollInterval{50};
constexpr std::chrono::microseconds kGpuSpinLimit{2000};

// One thread's watch over GPU work in flight, between two looks at it: a
// yield while the watch is younger than kGpuSpinLimit, else `sleep` (a wait
// of kGpuPollInterval that new work or a completion may cut short). A watch
// begins at the first pause and ends with reset(), when nothing is in
// flight any more. Called without the cycle lock.
class GpuWatch {
 public:
  template <typename Sleep>
  void pause(Sleep&& sleep) {
    const auto now = std::chrono::steady_clock::now();
    if (!watching_) {
      watching_ = true;
      began_ = now;
    }
    if (now - began_ < kGpuSpinLimit) {
      std::this_thread::yield();
    } else {
      sleep();
    }
  }
  void reset() { watching_ = false; }

 private:
  bool watching_ = false;
  std::chrono::steady_clock::time_point began_;
};

// A setting in seconds as a duration; beyond a billion seconds (32 years),
// which the clock's ticks might not hold, it is the longest duration.
std::chrono::steady_clock::duration seconds_setting(double seconds) {
  if (seconds >= 1e9) return std::chrono::steady_clock::duration::max();
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

// The executor reads the loop's own copy of the settings, which lives as
// long as it does, and records on the set's timeline tracks.
GpuSetContext with_loop(GpuSetContext context, const Config* config, int set_id) {
  context.config = config;
  context.set_id = set_id;
  return context;
}

// The bytes this rank puts into `entry`'s operation, for the timeline: a
// grouped allreduce's members (its input is the first member's too).
int64_t input_bytes(const TensorEntry& entry) {
  if (entry.group_inputs.empty()) return static_cast<int64_t>(entry.input.num_bytes());
  int64_t bytes = 0;
  for (const TensorView& view : entry.group_inputs) bytes += static_cast<int64_t>(view.num_bytes());
  return bytes;
}

}  // namespace

BackgroundLoop::BackgroundLoop(const Config& config, TensorQueue& queue, ControlChannel& control,
                               collectives::Transport& transport, std::vector<int> global_ranks,
                               std::string stop_reason, GpuSupport* gpu, GpuSetContext gpu_context,
                               ShmPath shm, int set_id, HierarchicalPath hierarchical)
    : config_(config),
      set_id_(set_id),
      global_ranks_(std::move(global_ranks)),
      stop_reason_(std::move(stop_reason)),
      cycle_time_(static_cast<int64_t>(config.cycle_time_ms * 1000.0)),
      stall_check_(seconds_setting(config.stall_check_seconds)),
      stall_shutdown_(seconds_setting(config.stall_shutdown_seconds)),
      queue_(queue),
      control_(control),
      executor_(transport, allreduce_options(config), shm, set_id, config.allreduce_algorithm,
                hierarchical),
      collective_executor_(transport, executor_, ring_segment_bytes(config), global_ranks_, set_id),
      gpu_(gpu),
      gpu_context_(with_loop(std::move(gpu_context), &config_, set_id)),
      cache_(static_cast<std::size_t>(config.cache_capacity)),
      join_(control.rank(), global_ranks_),
      fusion_threshold_bytes_(config.fusion_threshold_bytes),
      fusion_max_tensor_bytes_(config.fusion_max_tensor_bytes) {
  if (control_.rank() == 0) coordinator_.emplace(control_.size(), global_ranks_);
  // Only the global set tunes: its settings are the job's, and one log
  // serves it.
  if (config.autotune && set_id == 0) {
    AutotuneOptions options;
    options.warmup_samples = static_cast<int>(config.autotune_warmup_samples);
    options.steps_per_sample = static_cast<int>(config.autotune_steps_per_sample);
    options.log_path = rank_file_path(config.autotune_log, global_ranks_[control_.rank()]);
    const collectives::ShmAllreduceGroup* shm_group = executor_.shm_group();
    options.shm = shm_group != nullptr;
    options.shm_slot_bytes = shm_group != nullptr ? shm_group->slot_bytes() : 0;
    autotuner_ = std::make_unique<Autotuner>(tuned_settings(), options, control_.rank() == 0);
    if (!autotuner_->log_error().empty()) HERD_LOG(kWarning, "{}", autotuner_->log_error());
  }
}

void BackgroundLoop::request_shutdown() {
  shutdown_requested_.store(true);
  queue_.wake();
}

void BackgroundLoop::run() {
  herd_owned_thread() = true;
  std::unique_lock<std::mutex> lock(cycle_mutex_);
  GpuWatch gpu_watch;
  while (!finished_) {
    // Only GPU work in flight: watch its events rather than run agreement
    // rounds, which the other ranks, as idle, would join only after their
    // cycle time.
    if (idle_locked() && gpu_busy_locked()) {
      poll_gpu_locked();
      if (finished_) break;
      if (gpu_busy_locked() && !cycle_due_locked()) {
        lock.unlock();
        gpu_watch.pause([this] { queue_.wait_for_work(kGpuPollInterval); });
        lock.lock();
        continue;
      }
      if (!cycle_due_locked()) continue;
    }
    if (!gpu_busy_locked()) gpu_watch.reset();
    // Sleep only when this rank waits for nothing. While a tensor here waits
    // for other ranks, go straight into the next agreement, which blocks in
    // MPI until the slowest rank's loop joins it: a rank whose submission
    // arrives late then finds the others already waiting, instead of waiting
    // for them to wake from a sleep of up to a whole cycle. A joined rank does
    // not sleep either: the others' allreduces wait for it. Right after a
    // cycle that ran something, the next tensor tends to follow within
    // microseconds (a loop of allreduces, a backward pass): poll for it
    // briefly rather than sleep and pay a kernel wake-up.
    if (idle_locked() && !gpu_busy_locked()) {
      const auto spin = ran_something_ ? kSpinBeforeBlocking : std::chrono::microseconds{0};
      lock.unlock();
      queue_.wait_for_work(cycle_time_, spin);
      lock.lock();
      if (finished_) break;
    }
    run_cycle_locked();
  }
}

bool BackgroundLoop::idle_locked() const {
  return !join_.requested() && cached_pending_.empty() && negotiating_.empty() && uncached_.empty();
}

bool BackgroundLoop::cycle_due_locked() {
  return queue_.has_work() || shutdown_requested_.load() || join_.requested();
}

CompleteFn BackgroundLoop::completer() {
  return [this](TensorEntry& entry, const Status& status) {
    if (entry.handle) complete(entry, status.with_context(entry.handle->description() + ": "));
  };
}

Status BackgroundLoop::poll_gpu() {
  if (!gpu_executor_) return Status::ok();
  return gpu_executor_->poll(completer());
}

void BackgroundLoop::poll_gpu_locked() {
  run_step_locked([this](bool*) { return poll_gpu(); });
}

Status BackgroundLoop::start_gpu(const Response& spec, const std::vector<TensorEntry*>& entries,
                                 Contribution contribution) {
  // Submission refuses GPU views in a build without GPU support.
  HERD_ENFORCE(gpu_ != nullptr);
  if (!gpu_executor_) gpu_executor_ = gpu_->make_executor(gpu_context_);
  return gpu_executor_->start(spec, entries, contribution);
}

void BackgroundLoop::run_cycle_locked() {
  run_step_locked([this](bool* stop) { return run_cycle(stop); });
}

void BackgroundLoop::run_step_locked(const std::function<Status(bool* stop)>& step) {
  std::string reason;
  try {
    bool stop = false;
    const Status status = step(&stop);
    if (status.is_ok() && !stop) {
      work_left_.store(!idle_locked() || gpu_busy_locked());
      gpu_in_flight_.store(gpu_busy_locked());
      return;
    }
    if (stop) {
      reason = stall_stop_reason_.empty() ? stop_reason_ : stall_stop_reason_;
    } else {
      reason = "herd stopped after an error: " + status.message();
      HERD_LOG(kError, "{}", reason);
    }
  } catch (const std::exception& error) {
    reason = std::string("herd stopped after an internal error: ") + error.what();
    HERD_LOG(kError, "{}", reason);
  }
  fail_everything(reason, nullptr);
  finished_ = true;
  work_left_.store(false);
  gpu_in_flight_.store(false);
  // A background thread asleep between cycles must see that the loop is over.
  queue_.wake();
}

void BackgroundLoop::drive_until_done(const HandleState& handle) {
  // While another thread runs cycles, a waiter sleeps: whoever holds the lock
  // keeps cycling as long as this handle's entry is pending (a pending entry
  // never lets the background thread sleep), so the waiter needs to look
  // again only now and then, in case that thread was another waiter that has
  // left. Polling or waking often here would take the core from the thread
  // doing the work, which on a rank with one core is the same core.
  // Where the thread holding the lock watches GPU work instead, the handle
  // completes as soon as its event fires: look at the handle as a GpuWatch
  // looks at events, not to miss that by a wake-up.
  constexpr std::chrono::microseconds kRetry{1000};
  GpuWatch gpu_watch;
  while (!handle.done()) {
    std::unique_lock<std::mutex> lock(cycle_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      if (gpu_in_flight_.load()) {
        gpu_watch.pause([&handle] { handle.wait_for(kGpuPollInterval); });
      } else {
        handle.wait_for(kRetry);
      }
      continue;
    }
    if (finished_) return;
    if (idle_locked() && gpu_busy_locked() && !cycle_due_locked()) {
      // The handle's GPU work is in flight: watch for it (see run()).
      poll_gpu_locked();
      if (!handle.done()) {
        lock.unlock();
        gpu_watch.pause([&handle] { handle.wait_for(kGpuPollInterval); });
      }
      continue;
    }
    run_cycle_locked();
  }
  // Other threads' operations may still be pending, and the background
  // thread asleep (a cycle here drained what woke it): let it carry on. If
  // another thread holds the lock, it runs the cycles and checks the same.
  std::unique_lock<std::mutex> lock(cycle_mutex_, std::try_to_lock);
  if (lock.owns_lock() && !finished_ && work_left_.load()) queue_.wake();
}

Status BackgroundLoop::run_cycle(bool* stop) {
  ++cycles_;
  Timeline& timeline = process_timeline();
  if (timeline.on()) timeline.mark_cycle(set_id_, Timeline::Clock::now());
  const bool joined = join_.begin_cycle();
  HERD_RETURN_IF_ERROR(poll_gpu());
  for (TensorEntry& entry : queue_.drain()) classify(std::move(entry));

  CycleBits bits;
  bits.has_uncached = !uncached_.empty();
  bits.shutdown = shutdown_requested_.load();
  bits.stall_due = stall_due(std::chrono::steady_clock::now());
  bits.autotune_decision = autotuner_ && autotuner_->decision_pending();
  for (const auto& slot_and_entry : cached_pending_)
    bits.ready_slots.push_back(slot_and_entry.first);
  bits.invalid_slots.swap(invalid_slots_);
  bits.num_ranks = control_.size();
  bits.rank = control_.rank();
  bits.joined = joined;
  bits.wants_ready_ranks = timeline.on();
  // A joined rank is ready for every cached allreduce: the ranks still
  // running decide alone which of them go.
  if (joined) bits.ready_slots = join_.joinable_slots(cache_);
  // Every rank's cache is the same at the start of a cycle, so all agree on
  // the bound, and with it on the vector's length.
  const std::size_t slot_bound = cache_.slot_bound();
  const bool per_rank_ready = per_rank_ready_;
  std::vector<uint64_t> words = encode_cycle_bits(bits, slot_bound, per_rank_ready);
  HERD_RETURN_IF_ERROR(control_.and_allreduce(&words));
  const CycleAgreement agreement =
      decode_cycle_bits(words, slot_bound, control_.size(), per_rank_ready);
  per_rank_ready_ = agreement.any_wants_ready_ranks;
  if (agreement.any_shutdown) {
    *stop = true;
    return Status::ok();
  }
  if (agreement.autotune_decision) HERD_RETURN_IF_ERROR(take_autotune_decision());
  const JoinState::Progress join_progress = join_.agree(agreement.joined_ranks);
  if (join_progress == JoinState::Progress::kAllJoined) {
    if (coordinator_) coordinator_->set_joined({});
    return Status::ok();
  }
  const bool joined_changed = join_progress == JoinState::Progress::kChanged;
  if (joined_changed && coordinator_) coordinator_->set_joined(join_.joined_ranks());

  if (per_rank_ready) {
    mark_ready_ranks(agreement);
  } else {
    ready_marks_.clear();
  }
  // Every rank erases the same slots, so caches stay identical.
  for (uint32_t slot : agreement.invalid_anywhere) {
    if (cache_.occupied(slot)) cache_.erase(slot);
  }
  requeue_stale_cached_entries();

  std::vector<Agreed> agreed;
  for (uint32_t slot : agreement.ready_everywhere) {
    auto pending = cached_pending_.find(slot);
    if (pending != cached_pending_.end()) {
      agreed.push_back(Agreed{cache_.response(slot), std::move(pending->second)});
      cached_pending_.erase(pending);
    } else {
      // Only a joined rank can be ready for a slot it has no entry for.
      HERD_ENFORCE(joined);
      agreed.push_back(Agreed{cache_.response(slot), join_.stand_in_entry(cache_.response(slot))});
    }
    cache_.touch(slot);
  }
  if (!join_.joined_ranks().empty()) fail_cached_entries_blocked_by_join();
  ran_something_ = !agreed.empty() || agreement.any_uncached;
  if (agreement.any_uncached || !agreement.invalid_anywhere.empty() || joined_changed) {
    Status status = negotiate(&agreed);
    if (!status.is_ok()) {
      fail_everything("herd stopped after an error: " + status.message(), &agreed);
      return status;
    }
    // Puts may have evicted names that entries here were waiting on.
    requeue_stale_cached_entries();
  }
  Status status = execute(&agreed);
  if (!status.is_ok()) {
    fail_everything("herd stopped after an error: " + status.message(), &agreed);
    return status;
  }
  // After the execution: what every rank agreed on this cycle is not stalled.
  if (agreement.any_stall_due) return run_stall_round(stop);
  return Status::ok();
}

void BackgroundLoop::mark_ready_ranks(const CycleAgreement& agreement) {
  Timeline& timeline = process_timeline();
  const Timeline::Clock::time_point now = Timeline::Clock::now();
  const auto num_ranks = static_cast<std::size_t>(control_.size());
  for (std::size_t rank = 0; rank < agreement.ready_by_rank.size(); ++rank) {
    // A joined rank is ready for every cached allreduce: nothing to tell.
    const int label = global_ranks_[rank];
    if (std::find(agreement.joined_ranks.begin(), agreement.joined_ranks.end(),
                  static_cast<int>(rank)) != agreement.joined_ranks.end()) {
      continue;
    }
    for (uint32_t slot : agreement.ready_by_rank[rank]) {
      if (!cache_.occupied(slot)) continue;
      const std::string& name = cache_.response(slot).name;
      ReadyMarks& marks = ready_marks_[slot];
      if (marks.marked.empty() || marks.name != name) {
        marks.name = name;
        marks.marked.assign(num_ranks, false);
      }
      if (marks.marked[rank]) continue;
      marks.marked[rank] = true;
      if (timeline.on()) timeline.mark_ready(name, set_id_, label, now);
    }
  }
  // The next occurrence of these names is marked afresh.
  for (uint32_t slot : agreement.ready_everywhere) ready_marks_.erase(slot);
  for (uint32_t slot : agreement.invalid_anywhere) ready_marks_.erase(slot);
}

void BackgroundLoop::for_each_pending(const std::function<void(TensorEntry&)>& visit) {
  for (auto& slot_and_entry : cached_pending_) visit(slot_and_entry.second);
  for (TensorEntry& entry : uncached_) visit(entry);
  for (auto& name_and_entry : negotiating_) visit(name_and_entry.second);
}

bool BackgroundLoop::warning_due(const TensorEntry& entry,
                                 std::chrono::steady_clock::time_point now) const {
  return stall_check_.count() > 0 && !entry.stall_reported && now - entry.submitted >= stall_check_;
}

bool BackgroundLoop::shutdown_due(const TensorEntry& entry,
                                  std::chrono::steady_clock::time_point now) const {
  return stall_shutdown_.count() > 0 && now - entry.submitted >= stall_shutdown_;
}

PendingTensor BackgroundLoop::pending_tensor(const TensorEntry& entry,
                                             std::chrono::steady_clock::time_point now) const {
  PendingTensor tensor;
  tensor.name = entry.request.name;
  tensor.type = entry.request.type;
  tensor.waited_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - entry.submitted).count();
  tensor.warning_due = warning_due(entry, now);
  tensor.shutdown_due = shutdown_due(entry, now);
  return tensor;
}

bool BackgroundLoop::stall_due(std::chrono::steady_clock::time_point now) {
  if (stall_check_.count() <= 0 && stall_shutdown_.count() <= 0) return false;
  bool due = false;
  for_each_pending([&](TensorEntry& entry) {
    due = due || warning_due(entry, now) ||
          (!entry.stall_shutdown_judged && shutdown_due(entry, now));
  });
  return due;
}

Status BackgroundLoop::run_stall_round(bool* stop) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<PendingTensor> mine;
  for_each_pending([&](TensorEntry& entry) { mine.push_back(pending_tensor(entry, now)); });
  std::vector<std::vector<uint8_t>> pending_lists;
  HERD_RETURN_IF_ERROR(control_.gather_to_root(encode(mine), &pending_lists));
  std::vector<uint8_t> reply;
  if (coordinator_) reply = encode(judge(pending_lists));
  HERD_RETURN_IF_ERROR(control_.broadcast_from_root(&reply));
  StallVerdict verdict;
  HERD_RETURN_IF_ERROR(decode(reply, &verdict).with_context("stall verdict from rank 0: "));

  // Each entry raises the round's bit once for each limit it passes; a name
  // a warning has covered is not named by a later one.
  const std::unordered_set<std::string> named(verdict.names.begin(), verdict.names.end());
  for_each_pending([&](TensorEntry& entry) {
    if (warning_due(entry, now) || named.count(entry.request.name) > 0) {
      entry.stall_reported = true;
    }
    if (shutdown_due(entry, now)) entry.stall_shutdown_judged = true;
  });
  switch (verdict.action) {
    case StallAction::kNone: break;
    case StallAction::kWarn: HERD_LOG(kWarning, "{}", verdict.text); break;
    case StallAction::kShutdown:
      HERD_LOG(kError, "{}", verdict.text);
      stall_stop_reason_ = verdict.text;
      *stop = true;
      break;
  }
  return Status::ok();
}

StallVerdict BackgroundLoop::judge(const std::vector<std::vector<uint8_t>>& pending_lists) const {
  std::vector<std::vector<PendingTensor>> by_rank(pending_lists.size());
  for (std::size_t rank = 0; rank < pending_lists.size(); ++rank) {
    const Status status = decode(pending_lists[rank], &by_rank[rank]);
    if (!status.is_ok()) {
      // Stop every rank rather than leave them waiting on rank 0.
      StallVerdict fatal;
      fatal.action = StallAction::kShutdown;
      fatal.text = fmt::format(
          "herd stopped after an error: coordinator (rank 0): pending tensors of rank {}: {}",
          global_ranks_[rank], status.message());
      return fatal;
    }
  }
  return judge_stalls(by_rank, join_.joined_ranks(), global_ranks_);
}

std::shared_ptr<HandleState> BackgroundLoop::join(int* last_rank) {
  auto handle = std::make_shared<HandleState>("join");
  handle->set_driver(weak_from_this());
  if (join_.request(handle, last_rank)) queue_.wake();
  return handle;
}

void BackgroundLoop::fail_cached_entries_blocked_by_join() {
  for (auto it = cached_pending_.begin(); it != cached_pending_.end();) {
    const Status status = join_.check_runs_while_joined(it->second);
    if (status.is_ok()) {
      ++it;
      continue;
    }
    complete(it->second, status);
    it = cached_pending_.erase(it);
  }
}

void BackgroundLoop::classify(TensorEntry entry) {
  Timeline& timeline = process_timeline();
  if (timeline.on()) {
    timeline.begin(entry.request.name, set_id_, Timeline::negotiate_label(entry.request.type),
                   entry.submitted);
  }
  const ResponseCache::Lookup lookup = cache_.lookup(entry.request);
  switch (lookup.state) {
    case ResponseCache::LookupState::kHit:
      cached_pending_.emplace(lookup.slot, std::move(entry));
      return;
    case ResponseCache::LookupState::kMismatch:
      // Other ranks may be waiting on the old signature's bit: make every
      // rank drop the slot and renegotiate the name.
      invalid_slots_.push_back(lookup.slot);
      uncached_.push_back(std::move(entry));
      return;
    case ResponseCache::LookupState::kMiss: uncached_.push_back(std::move(entry)); return;
  }
}

void BackgroundLoop::requeue_stale_cached_entries() {
  for (auto it = cached_pending_.begin(); it != cached_pending_.end();) {
    const uint32_t slot = it->first;
    if (cache_.occupied(slot) && cache_.response(slot).matches(it->second.request)) {
      ++it;
      continue;
    }
    uncached_.push_back(std::move(it->second));
    it = cached_pending_.erase(it);
  }
}

Status BackgroundLoop::negotiate(std::vector<Agreed>* agreed) {
  RequestList mine;
  for (TensorEntry& entry : uncached_) {
    mine.requests.push_back(entry.request);
    const std::string name = entry.request.name;
    negotiating_.emplace(name, std::move(entry));
  }
  uncached_.clear();

  std::vector<std::vector<uint8_t>> request_lists;
  HERD_RETURN_IF_ERROR(control_.gather_to_root(encode(mine), &request_lists));
  std::vector<uint8_t> reply;
  if (coordinator_) {
    ResponseList responses;
    Status status = coordinate(request_lists, &responses);
    if (!status.is_ok()) {
      // Tell every rank to stop rather than leave them waiting on rank 0.
      Response fatal;
      fatal.type = ResponseType::kError;
      fatal.error_message = "coordinator (rank 0): " + status.message();
      responses.responses = {fatal};
    }
    reply = encode(responses);
  }
  HERD_RETURN_IF_ERROR(control_.broadcast_from_root(&reply));
  ResponseList responses;
  HERD_RETURN_IF_ERROR(
      decode(reply.data(), reply.size(), &responses).with_context("response list from rank 0: "));

  for (Response& response : responses.responses) {
    if (response.name.empty()) return Status::error(response.error_message);
    // Every rank, joined or not, puts the same responses in the same order.
    // Barrier names are used once each, so caching them would only evict.
    if (response.type != ResponseType::kError && response.collective != CollectiveType::kBarrier) {
      (void)cache_.put(response);
    }
    auto pending = negotiating_.find(response.name);
    if (pending == negotiating_.end()) {
      if (join_.joined_this_cycle() && response.type == ResponseType::kExecute) {
        // The others run it while this rank has joined: take part with the
        // identity of the op.
        agreed->push_back(Agreed{response, join_.stand_in_entry(response)});
        continue;
      }
      // An error for the ranks that asked: this rank has joined, or others
      // have and the collective cannot run while they are (coordinator.cc).
      if (join_.joined_this_cycle() ||
          (response.type == ResponseType::kError && !join_.joined_ranks().empty())) {
        continue;
      }
      return Status::error(fmt::format("rank 0 answered for '{}', which rank {} has not requested",
                                       response.name, control_.rank()));
    }
    agreed->push_back(Agreed{std::move(response), std::move(pending->second)});
    negotiating_.erase(pending);
  }
  return Status::ok();
}

Status BackgroundLoop::coordinate(const std::vector<std::vector<uint8_t>>& request_lists,
                                  ResponseList* responses) {
  // Rank 0 learns here that each requesting rank is ready for its names.
  Timeline& timeline = process_timeline();
  const Timeline::Clock::time_point now = Timeline::Clock::now();
  for (int rank = 0; rank < static_cast<int>(request_lists.size()); ++rank) {
    RequestList list;
    const std::vector<uint8_t>& bytes = request_lists[rank];
    HERD_RETURN_IF_ERROR(decode(bytes.data(), bytes.size(), &list)
                             .with_context(fmt::format("request list from rank {}: ", rank)));
    for (const Request& request : list.requests) {
      if (request.rank != rank) {
        return Status::error(fmt::format("request for '{}' from rank {} claims rank {}",
                                         request.name, rank, request.rank));
      }
      HERD_RETURN_IF_ERROR(coordinator_->add(request));
      if (timeline.on()) timeline.mark_ready(request.name, set_id_, global_ranks_[rank], now);
    }
  }
  responses->responses = coordinator_->take_ready();
  return Status::ok();
}

Status BackgroundLoop::execute(std::vector<Agreed>* agreed) {
  Timeline& timeline = process_timeline();
  if (timeline.on()) {
    // Every rank has agreed: the negotiation of each tensor here ends, and
    // it waits in QUEUE while the groups before its own run.
    const Timeline::Clock::time_point now = Timeline::Clock::now();
    for (const Agreed& item : *agreed) {
      if (item.entry.handle && item.response.type != ResponseType::kError) {
        timeline.end(item.entry.request.name, set_id_, now);
        timeline.begin(item.entry.request.name, set_id_, "QUEUE", now);
      }
    }
  }
  std::vector<Response> responses;
  responses.reserve(agreed->size());
  for (Agreed& item : *agreed) {
    if (item.response.type == ResponseType::kError) {
      complete(item.entry, Status::error(item.response.error_message));
    }
    responses.push_back(item.response);
  }
  const std::vector<FusionGroup> groups =
      plan_fusion(responses, fusion_threshold_bytes_, fusion_max_tensor_bytes_);
  // Bytes of the CPU groups after the current one: what passes through this
  // rank's cache before the cycle ends (the shared-memory allreduce streams
  // outputs that will have left it by then).
  const auto cpu_bytes = [&](const FusionGroup& group) {
    return responses[group.members.front()].device.type == DeviceType::kGPU ? std::size_t{0}
                                                                            : group.total_bytes;
  };
  std::size_t later_bytes = 0;
  for (const FusionGroup& group : groups) later_bytes += cpu_bytes(group);
  for (const FusionGroup& group : groups) {
    later_bytes -= cpu_bytes(group);
    std::vector<TensorEntry*> entries;
    for (std::size_t member : group.members) entries.push_back(&(*agreed)[member].entry);
    const Response& spec = responses[group.members.front()];
    HERD_LOG(kTrace, "{} of {} tensor(s), {} bytes, first '{}'", to_string(spec.collective),
             entries.size(), group.total_bytes, spec.name);
    if (timeline.on()) {
      const Timeline::Clock::time_point now = Timeline::Clock::now();
      for (const TensorEntry* entry : entries) {
        if (!entry->handle) continue;
        timeline.end(entry->request.name, set_id_, now);
        timeline.begin(entry->request.name, set_id_, Timeline::operation_label(spec.collective),
                       now, input_bytes(*entry));
      }
    }
    const auto run_started = std::chrono::steady_clock::now();
    bool run_counted = false;
    for (TensorEntry* entry : entries) {
      if (!entry->handle) continue;
      entry->run_started = run_started;
      entry->counts_run = !run_counted;
      run_counted = true;
    }
    Contribution contribution;
    contribution.identity = join_.joined_this_cycle();
    Status status;
    if (spec.device.type == DeviceType::kGPU) {
      // Moves the entries on success: their handles complete in poll_gpu.
      status = start_gpu(spec, entries, contribution);
    } else if (spec.collective == CollectiveType::kAllreduce) {
      status = executor_.allreduce(spec, entries, contribution, later_bytes);
    } else {
      status = collective_executor_.execute(spec, *entries.front(), contribution);
    }
    for (TensorEntry* entry : entries) {
      if (entry->handle) complete(*entry, status.with_context(entry->handle->description() + ": "));
    }
    if (!status.is_ok()) return status;
  }
  if (autotuner_ && coordinator_ && !autotuner_->finished()) record_for_autotune(*agreed);
  agreed->clear();
  return Status::ok();
}

void BackgroundLoop::record_for_autotune(const std::vector<Agreed>& agreed) {
  std::vector<std::string> names;
  int64_t bytes = 0;
  for (const Agreed& item : agreed) {
    if (item.response.type == ResponseType::kError || item.entry.request.name.empty()) continue;
    names.push_back(item.entry.request.name);
    bytes += input_bytes(item.entry);
  }
  autotuner_->record(names, bytes, Autotuner::Clock::now());
}

Status BackgroundLoop::take_autotune_decision() {
  std::vector<uint8_t> bytes;
  // Rank 0 raises the flag only with a decision pending.
  if (coordinator_) bytes = encode(autotuner_->take_decision());
  HERD_RETURN_IF_ERROR(control_.broadcast_from_root(&bytes));
  AutotuneDecision decision;
  HERD_RETURN_IF_ERROR(decode(bytes, &decision).with_context("autotuning decision from rank 0: "));
  apply(decision.settings);
  if (autotuner_) autotuner_->applied(decision, cycles_, Autotuner::Clock::now());
  if (decision.final) {
    HERD_LOG(kInfo,
             "autotuning fixed HERD_FUSION_THRESHOLD={} HERD_FUSION_MAX_TENSOR_BYTES={} "
             "shared-memory chunk {} HERD_RING_SEGMENT_BYTES={} ({:.0f} bytes/s)",
             decision.settings.fusion_threshold_bytes, decision.settings.fusion_max_tensor_bytes,
             decision.settings.shm_chunk_bytes, decision.settings.ring_segment_bytes,
             decision.best_score);
  }
  return Status::ok();
}

void BackgroundLoop::apply(const TunedSettings& settings) {
  fusion_threshold_bytes_ = settings.fusion_threshold_bytes;
  fusion_max_tensor_bytes_ = settings.fusion_max_tensor_bytes;
  executor_.set_shm_chunk_bytes(static_cast<std::size_t>(settings.shm_chunk_bytes));
  executor_.set_ring_segment_bytes(static_cast<std::size_t>(settings.ring_segment_bytes));
}

TunedSettings BackgroundLoop::tuned_settings() const {
  TunedSettings settings;
  settings.fusion_threshold_bytes = fusion_threshold_bytes_;
  settings.fusion_max_tensor_bytes = fusion_max_tensor_bytes_;
  settings.shm_chunk_bytes = static_cast<int64_t>(executor_.shm_chunk_bytes());
  settings.ring_segment_bytes = static_cast<int64_t>(executor_.ring_segment_bytes());
  return settings;
}

void BackgroundLoop::complete(TensorEntry& entry, const Status& status) {
  if (!entry.handle) return;
  // Ends the entry's operation, or its negotiation when it fails before one.
  Timeline& timeline = process_timeline();
  if (timeline.on()) timeline.end(entry.request.name, set_id_, Timeline::Clock::now());
  const auto now = std::chrono::steady_clock::now();
  OperationStats& stats = process_stats();
  if (entry.counts_run && status.is_ok()) {
    stats.record_run(set_id_, entry.request.type, now - entry.run_started);
  }
  // A barrier's token is herd's, not the caller's data.
  const int64_t bytes = entry.request.type == CollectiveType::kBarrier ? 0 : input_bytes(entry);
  stats.record_operation(set_id_, entry.request.type, status.is_ok(), bytes, now - entry.submitted);
  // Free the name before waking the waiter, who may resubmit it at once.
  queue_.finish(entry.request.name);
  // After a fault, a failure also names the ranks this one no longer hears
  // from: each rank's own wait names only the peer it waited for.
  entry.handle->complete(status.is_ok() ? status
                                        : status.with_note(collectives::silent_ranks_note()));
  entry.handle.reset();
}

void BackgroundLoop::fail_everything(const std::string& reason, std::vector<Agreed>* in_flight) {
  auto fail = [&](TensorEntry& entry) {
    if (entry.handle) complete(entry, Status::error(entry.handle->description() + ": " + reason));
  };
  if (in_flight) {
    for (Agreed& item : *in_flight) fail(item.entry);
    in_flight->clear();
  }
  for (auto& slot_and_entry : cached_pending_) fail(slot_and_entry.second);
  cached_pending_.clear();
  for (TensorEntry& entry : uncached_) fail(entry);
  uncached_.clear();
  for (auto& name_and_entry : negotiating_) fail(name_and_entry.second);
  negotiating_.clear();
  // Later submissions fail with the reason as it reaches the handles.
  for (TensorEntry& entry : queue_.close(reason + collectives::silent_ranks_note())) fail(entry);
  // GPU work in flight finishes (or times out) before its handles complete:
  // until then the GPU may still write the callers' outputs.
  if (gpu_executor_) gpu_executor_->stop(reason, completer());
  join_.fail(reason + collectives::silent_ranks_note());
}

}  // namespace herd::detail
