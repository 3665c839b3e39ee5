// Records read ahead on worker threads, handed out in order
// (include/herd/data/record_prefetcher.h).
#include "herd/data/record_prefetcher.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "herd/error.h"

namespace herd::data {

// Position k of the order is read into slot k % slots.size(). A worker
// claims positions in order, and only while the position lies fewer than
// slots.size() ahead of the consumer's, so a claimed slot is always free
// and at most slots.size() records are in memory.
struct RecordPrefetcher::State {
  struct Slot {
    std::vector<uint8_t> record;
    std::exception_ptr error;
    bool ready = false;
  };

  State(const RecordShard& shard_in, std::vector<std::size_t> order_in, std::size_t slot_count)
      : shard(shard_in), order(std::move(order_in)), slots(slot_count) {}

  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      space.wait(lock, [&] {
        return stopping || failed || claimed == order.size() || claimed < handed_out + slots.size();
      });
      if (stopping || failed || claimed == order.size()) return;
      const std::size_t position = claimed++;
      Slot& slot = slots[position % slots.size()];
      lock.unlock();
      std::exception_ptr error;
      try {
        shard.read(order[position], &slot.record);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      slot.error = error;
      slot.ready = true;
      if (error) {
        // Positions after it are not read: the consumer stops at the error.
        failed = true;
        space.notify_all();
      }
      filled.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    space.notify_all();
    for (std::thread& worker : workers) worker.join();
    workers.clear();
  }

  const RecordShard& shard;
  const std::vector<std::size_t> order;
  std::vector<Slot> slots;
  std::mutex mutex;
  std::condition_variable space;   // workers: a slot came free, or stop
  std::condition_variable filled;  // the consumer: a record is ready
  std::size_t claimed = 0;         // positions taken by workers
  std::size_t handed_out = 0;      // positions given to the consumer
  bool stopping = false;
  bool failed = false;
  std::exception_ptr failure;  // once handed out, every later next() throws it
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
  state_ = new State(shard, std::move(order), slots);
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
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.failure) std::rethrow_exception(s.failure);
  if (s.handed_out == s.order.size()) return false;
  State::Slot& slot = s.slots[s.handed_out % s.slots.size()];
  s.filled.wait(lock, [&] { return slot.ready; });
  if (slot.error) {
    s.failure = slot.error;
    std::rethrow_exception(s.failure);
  }
  // The caller's old buffer goes to the slot, to be refilled without a
  // new allocation.
  record->swap(slot.record);
  slot.ready = false;
  ++s.handed_out;
  lock.unlock();
  s.space.notify_one();
  return true;
}

}  // namespace herd::data
