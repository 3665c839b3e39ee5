#include "herd_train/batch_loader.h"

#include <algorithm>
#include <string>

#include "herd/error.h"

namespace herd_train {

BatchLoader::BatchLoader(const Dataset& data, const std::vector<int64_t>& indices,
                         int64_t batch_size, int64_t steps, int threads)
    : data_(data), indices_(indices), batch_size_(batch_size), steps_(steps) {
  if (batch_size < 1) throw herd::Error("BatchLoader: batch size must be >= 1");
  if (steps < 0) throw herd::Error("BatchLoader: steps must be >= 0");
  if (threads < 1) throw herd::Error("BatchLoader: threads must be >= 1");
  if (steps > 0 && static_cast<int64_t>(indices.size()) / batch_size < steps) {
    throw herd::Error("BatchLoader: " + std::to_string(steps) + " batches of " +
                      std::to_string(batch_size) + " need " + std::to_string(steps * batch_size) +
                      " indices, got " + std::to_string(indices.size()));
  }
  // More threads or slots than batches would only sit idle.
  const int64_t workers = std::min<int64_t>(threads, steps);
  const int64_t slots = std::min<int64_t>(2 * static_cast<int64_t>(threads), steps);
  slots_.resize(static_cast<std::size_t>(slots));
  for (Slot& slot : slots_) {
    slot.batch.inputs.resize(static_cast<std::size_t>(batch_size * data.features()));
    slot.batch.labels.resize(static_cast<std::size_t>(batch_size));
  }
  try {
    workers_.reserve(static_cast<std::size_t>(workers));
    for (int64_t i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    // The destructor does not run for a constructor that throws: join the
    // threads already started here.
    shutdown();
    throw;
  }
}

BatchLoader::~BatchLoader() { shutdown(); }

void BatchLoader::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void BatchLoader::assemble(int64_t step, Batch& batch) const {
  const int64_t features = data_.features();
  for (int64_t j = 0; j < batch_size_; ++j) {
    const int64_t sample = indices_[static_cast<std::size_t>(step * batch_size_ + j)];
    if (sample < 0 || sample >= data_.count) {
      throw herd::Error("BatchLoader: batch " + std::to_string(step) + " has sample index " +
                        std::to_string(sample) + ", outside the dataset's " +
                        std::to_string(data_.count) + " samples");
    }
    pixels_to_inputs(data_.image(sample), features, batch.inputs.data() + j * features);
    batch.labels[static_cast<std::size_t>(j)] = data_.labels[static_cast<std::size_t>(sample)];
  }
  batch.step = step;
}

void BatchLoader::work() {
  const auto num_slots = static_cast<int64_t>(slots_.size());
  for (;;) {
    int64_t step = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Steps are claimed in order; step s may start once the consumer has
      // released step s - num_slots, the previous user of its slot. After an
      // error no further step is claimed (next() never gets past it).
      space_.wait(lock, [&] {
        return stop_ || error_ || next_claim_ >= steps_ || next_claim_ < released_ + num_slots;
      });
      if (stop_ || error_ || next_claim_ >= steps_) return;
      step = next_claim_++;
    }
    // The slot is this worker's alone until it is marked ready: copy unlocked.
    Slot& slot = slots_[static_cast<std::size_t>(step % num_slots)];
    std::exception_ptr failure;
    try {
      assemble(step, slot.batch);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure) {
        // Keep the earliest failing step: batches before it are still handed out.
        if (!error_ || step < error_step_) {
          error_ = failure;
          error_step_ = step;
        }
      } else {
        slot.ready = true;
      }
    }
    filled_.notify_all();
    if (failure) space_.notify_all();  // the other workers stop claiming
  }
}

const BatchLoader::Batch& BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_step_ >= steps_) {
    throw herd::Error("BatchLoader: next() after the last of " + std::to_string(steps_) +
                      " batches");
  }
  const int64_t step = next_step_;
  const auto num_slots = static_cast<int64_t>(slots_.size());
  // The batch returned last time is done with: free its slot for a worker.
  if (released_ < step) {
    slots_[static_cast<std::size_t>((step - 1) % num_slots)].ready = false;
    released_ = step;
    space_.notify_all();
  }
  Slot& slot = slots_[static_cast<std::size_t>(step % num_slots)];
  filled_.wait(lock, [&] { return slot.ready || (error_ && error_step_ <= step); });
  if (!slot.ready) std::rethrow_exception(error_);
  ++next_step_;
  return slot.batch;
}

}  // namespace herd_train
