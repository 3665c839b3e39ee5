// Records read ahead on worker threads, handed out in order
// (include/herd/data/record_prefetcher.h).
#include "herd/data/record_prefetcher.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "herd/error.h"

namespace herd::data {

// Position k of the order is read into slot k % slots.size(). Workers claim
// runs of `batch` consecutive positions, and only runs that end fewer than
// slots.size() positions ahead of the consumer, so a claimed slot is always
// free and at most slots.size() records are in memory. Claiming and handing
// over a run at a time, rather than a record, keeps the workers and the
// consumer from waking each other for every small record. The consumer, for
// its part, takes the lock only when it has used up the records it last saw
// ready: then it gives back the slots it emptied and looks for more.
struct RecordPrefetcher::State {
  struct Slot {
    std::vector<uint8_t> record;
    std::exception_ptr error;
    bool ready = false;
  };

  State(const RecordShard& shard_in, std::vector<std::size_t> order_in, std::size_t slot_count,
        std::size_t batch_in)
      : shard(shard_in), order(std::move(order_in)), slots(slot_count), batch(batch_in) {}

  // The length of the next run to claim.
  std::size_t next_run() const { return std::min(batch, order.size() - claimed); }
  // Whether a worker may claim the next run now (the lock held).
  bool run_fits() const {
    return claimed < order.size() && claimed + next_run() <= handed_out + slots.size();
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      space.wait(lock, [&] { return stopping || failed || claimed == order.size() || run_fits(); });
      if (stopping || failed || claimed == order.size()) return;
      const std::size_t first = claimed;
      const std::size_t length = next_run();
      claimed += length;
      lock.unlock();
      std::size_t done = 0;
      std::exception_ptr error;
      for (; done < length && !stopping_now.load(std::memory_order_relaxed); ++done) {
        try {
          shard.read(order[first + done], &slots[(first + done) % slots.size()].record);
        } catch (...) {
          error = std::current_exception();
          break;
        }
      }
      lock.lock();
      for (std::size_t i = 0; i < done; ++i) slots[(first + i) % slots.size()].ready = true;
      if (error) {
        // Positions after it are not read: the consumer stops at the error.
        Slot& broken = slots[(first + done) % slots.size()];
        broken.error = error;
        broken.ready = true;
        failed = true;
        space.notify_all();
      }
      filled.notify_one();
    }
  }

  // The consumer's wait for the record at `taken`: gives back the slots of
  // the records taken since the last call, waits until that record is ready
  // and counts the ready ones from it on.
  void wait_for_records() {
    std::unique_lock<std::mutex> lock(mutex);
    for (std::size_t k = handed_out; k < taken; ++k) slots[k % slots.size()].ready = false;
    handed_out = taken;
    if (run_fits()) space.notify_all();
    filled.wait(lock, [&] { return slots[taken % slots.size()].ready; });
    seen_ready = taken;
    while (seen_ready < order.size() && seen_ready - taken < slots.size() &&
           slots[seen_ready % slots.size()].ready) {
      ++seen_ready;
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      stopping_now.store(true, std::memory_order_relaxed);
    }
    space.notify_all();
    for (std::thread& worker : workers) worker.join();
    workers.clear();
  }

  const RecordShard& shard;
  const std::vector<std::size_t> order;
  std::vector<Slot> slots;
  const std::size_t batch;
  std::mutex mutex;
  std::condition_variable space;   // workers: a run came free, or stop
  std::condition_variable filled;  // the consumer: records are ready
  std::size_t claimed = 0;         // positions taken by workers
  std::size_t handed_out = 0;      // positions whose slots the consumer gave back
  // The consumer's own, without the lock: the positions handed to the
  // caller, and the end of those it saw ready.
  std::size_t taken = 0;
  std::size_t seen_ready = 0;
  bool stopping = false;
  // `stopping` for a worker amid a run, which it reads without the lock.
  std::atomic<bool> stopping_now{false};
  bool failed = false;
  std::exception_ptr failure;  // the consumer's: once thrown, every later next() throws it
  std::vector<std::thread> workers;
};

RecordPrefetcher::RecordPrefetcher(const RecordShard& shard, std::vector<std::size_t> order,
                                   int threads, std::size_t capacity) {
  if (threads < 1) {
    throw Error("RecordPrefetcher: threads must be at least 1, got " + std::to_string(threads),
                ErrorKind::kInvalidArgument);
  }
  if (capacity < 1) {
    throw Error("RecordPrefetcher: capacity must be at least 1 record, got 0",
                ErrorKind::kInvalidArgument);
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (order[k] >= shard.size()) {
      throw Error("RecordPrefetcher: position " + std::to_string(k) +
                      " of the order names record " + std::to_string(order[k]) +
                      ", where the shard (part " + std::to_string(shard.part_index()) + " of " +
                      std::to_string(shard.num_parts()) + ") has " + std::to_string(shard.size()) +
                      " records",
                  ErrorKind::kInvalidArgument);
    }
  }
  // More slots or threads than records would only sit idle.
  const std::size_t slots = std::max<std::size_t>(1, std::min(capacity, order.size()));
  const std::size_t workers = std::min(static_cast<std::size_t>(threads), order.size());
  // Runs short enough that every worker has one in progress while the
  // consumer takes the records of as many others.
  const std::size_t batch =
      std::max<std::size_t>(1, slots / (2 * std::max<std::size_t>(1, workers)));
  state_ = new State(shard, std::move(order), slots, batch);
  try {
    for (std::size_t i = 0; i < workers; ++i)
      state_->workers.emplace_back([s = state_] { s->work(); });
  } catch (...) {
    state_->stop();
    delete state_;
    throw;
  }
}

RecordPrefetcher::~RecordPrefetcher() {
  state_->stop();
  delete state_;
}

bool RecordPrefetcher::next(std::vector<uint8_t>* record) {
  State& s = *state_;
  if (s.failure) std::rethrow_exception(s.failure);
  if (s.taken == s.order.size()) return false;
  if (s.taken == s.seen_ready) s.wait_for_records();
  // Seen ready under the lock, so the worker's writes to the slot are
  // visible; no worker touches it until wait_for_records gives it back.
  State::Slot& slot = s.slots[s.taken % s.slots.size()];
  if (slot.error) {
    s.failure = slot.error;
    std::rethrow_exception(s.failure);
  }
  // The caller's old buffer goes to the slot, to be refilled without a
  // new allocation.
  record->swap(slot.record);
  ++s.taken;
  return true;
}

}  // namespace herd::data
