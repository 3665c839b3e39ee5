#include "src/background_loop.h"

#include <exception>

#include <fmt/format.h>

#include "common/enforce.h"
#include "common/logging.h"
#include "src/cycle_bits.h"
#include "src/fusion_plan.h"

namespace herd::detail {
namespace {

collectives::AllreduceOptions allreduce_options(const Config& config) {
  collectives::AllreduceOptions options;
  options.segment_bytes = static_cast<std::size_t>(config.ring_segment_bytes);
  options.small_message_threshold_bytes = static_cast<std::size_t>(config.small_allreduce_bytes);
  return options;
}

}  // namespace

BackgroundLoop::BackgroundLoop(const Config& config, TensorQueue& queue, ControlChannel& control,
                               collectives::Transport& transport, std::vector<int> global_ranks,
                               std::string stop_reason)
    : config_(config),
      global_ranks_(std::move(global_ranks)),
      stop_reason_(std::move(stop_reason)),
      cycle_time_(static_cast<int64_t>(config.cycle_time_ms * 1000.0)),
      queue_(queue),
      control_(control),
      executor_(transport, allreduce_options(config)),
      collective_executor_(transport, executor_,
                           static_cast<std::size_t>(config.ring_segment_bytes)),
      cache_(static_cast<std::size_t>(config.cache_capacity)) {
  if (control_.rank() == 0) coordinator_.emplace(control_.size(), global_ranks_);
}

void BackgroundLoop::request_shutdown() {
  shutdown_requested_.store(true);
  queue_.wake();
}

void BackgroundLoop::run() {
  std::string reason;
  try {
    bool stop = false;
    while (!stop) {
      Status status = run_cycle(&stop);
      if (!status.is_ok()) {
        reason = "herd stopped after an error: " + status.message();
        HERD_LOG(kError, "{}", reason);
        break;
      }
    }
    if (stop) reason = stop_reason_;
  } catch (const std::exception& error) {
    reason = std::string("herd stopped after an internal error: ") + error.what();
    HERD_LOG(kError, "{}", reason);
  }
  fail_everything(reason, nullptr);
}

Status BackgroundLoop::run_cycle(bool* stop) {
  // Sleep only when this rank waits for nothing. While a tensor here waits for
  // other ranks, go straight into the next agreement, which blocks in MPI
  // until the slowest rank's loop joins it: a rank whose submission arrives
  // late then finds the others already waiting, instead of waiting for them
  // to wake from a sleep of up to a whole cycle.
  if (cached_pending_.empty() && negotiating_.empty() && uncached_.empty()) {
    queue_.wait_for_work(cycle_time_);
  }
  for (TensorEntry& entry : queue_.drain()) classify(std::move(entry));

  CycleBits bits;
  bits.has_uncached = !uncached_.empty();
  bits.shutdown = shutdown_requested_.load();
  for (const auto& slot_and_entry : cached_pending_)
    bits.ready_slots.push_back(slot_and_entry.first);
  bits.invalid_slots.swap(invalid_slots_);
  std::vector<uint64_t> words = encode_cycle_bits(bits, cache_.capacity());
  HERD_RETURN_IF_ERROR(control_.and_allreduce(&words));
  const CycleAgreement agreement = decode_cycle_bits(words, cache_.capacity());
  if (agreement.any_shutdown) {
    *stop = true;
    return Status::ok();
  }

  // Every rank erases the same slots, so caches stay identical.
  for (uint32_t slot : agreement.invalid_anywhere) {
    if (cache_.occupied(slot)) cache_.erase(slot);
  }
  requeue_stale_cached_entries();

  std::vector<Agreed> agreed;
  for (uint32_t slot : agreement.ready_everywhere) {
    auto pending = cached_pending_.find(slot);
    HERD_ENFORCE(pending != cached_pending_.end());
    agreed.push_back(Agreed{cache_.response(slot), std::move(pending->second)});
    cache_.touch(slot);
    cached_pending_.erase(pending);
  }
  if (agreement.any_uncached || !agreement.invalid_anywhere.empty()) {
    Status status = negotiate(&agreed);
    if (!status.is_ok()) {
      fail_everything("herd stopped after an error: " + status.message(), &agreed);
      return status;
    }
    // Puts may have evicted names that entries here were waiting on.
    requeue_stale_cached_entries();
  }
  report_stalls();
  Status status = execute(&agreed);
  if (!status.is_ok()) fail_everything("herd stopped after an error: " + status.message(), &agreed);
  return status;
}

void BackgroundLoop::report_stalls() {
  if (config_.stall_check_seconds <= 0.0) return;
  const auto limit = std::chrono::duration_cast<Coordinator::Clock::duration>(
      std::chrono::duration<double>(config_.stall_check_seconds));
  const auto now = Coordinator::Clock::now();
  // Rank 0 sees which ranks have not sent a name it is negotiating; a name
  // settled by the cache is invisible to it, so each rank watches its own.
  if (coordinator_) {
    for (const std::string& message : coordinator_->stall_report(now, limit)) {
      HERD_LOG(kWarning, "{}; a rank that never submits it stalls every rank waiting for it",
               message);
    }
  }
  for (auto& slot_and_entry : cached_pending_) {
    TensorEntry& entry = slot_and_entry.second;
    if (entry.stall_reported || now - entry.submitted < limit) continue;
    entry.stall_reported = true;
    const std::chrono::duration<double> waited = now - entry.submitted;
    HERD_LOG(kWarning, "{} has waited {:.1f} s on rank {} for the other ranks to submit it",
             entry.handle->description(), waited.count(), global_ranks_[control_.rank()]);
  }
}

void BackgroundLoop::classify(TensorEntry entry) {
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
    auto pending = negotiating_.find(response.name);
    if (pending == negotiating_.end()) {
      return Status::error(fmt::format("rank 0 answered for '{}', which rank {} has not requested",
                                       response.name, control_.rank()));
    }
    // Barrier names are used once each, so caching them would only evict.
    if (response.type != ResponseType::kError && response.collective != CollectiveType::kBarrier) {
      (void)cache_.put(response);
    }
    agreed->push_back(Agreed{std::move(response), std::move(pending->second)});
    negotiating_.erase(pending);
  }
  return Status::ok();
}

Status BackgroundLoop::coordinate(const std::vector<std::vector<uint8_t>>& request_lists,
                                  ResponseList* responses) {
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
    }
  }
  responses->responses = coordinator_->take_ready();
  return Status::ok();
}

Status BackgroundLoop::execute(std::vector<Agreed>* agreed) {
  std::vector<Response> responses;
  responses.reserve(agreed->size());
  for (Agreed& item : *agreed) {
    if (item.response.type == ResponseType::kError) {
      complete(item.entry, Status::error(item.response.error_message));
    }
    responses.push_back(item.response);
  }
  for (const FusionGroup& group : plan_fusion(responses, config_.fusion_threshold_bytes)) {
    std::vector<TensorEntry*> entries;
    for (std::size_t member : group.members) entries.push_back(&(*agreed)[member].entry);
    const Response& spec = responses[group.members.front()];
    HERD_LOG(kTrace, "{} of {} tensor(s), {} bytes, first '{}'", to_string(spec.collective),
             entries.size(), group.total_bytes, spec.name);
    const Status status = spec.collective == CollectiveType::kAllreduce
                              ? executor_.allreduce(spec, entries)
                              : collective_executor_.execute(spec, *entries.front());
    for (TensorEntry* entry : entries) {
      complete(*entry, status.with_context(entry->handle->description() + ": "));
    }
    if (!status.is_ok()) return status;
  }
  agreed->clear();
  return Status::ok();
}

void BackgroundLoop::complete(TensorEntry& entry, const Status& status) {
  if (!entry.handle) return;
  // Free the name before waking the waiter, who may resubmit it at once.
  queue_.finish(entry.request.name);
  entry.handle->complete(status);
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
  for (TensorEntry& entry : queue_.close(reason)) fail(entry);
}

}  // namespace herd::detail
