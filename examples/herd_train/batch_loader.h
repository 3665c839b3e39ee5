// BatchLoader: assembles herd-train's batches ahead of the training thread on
// --data-threads worker threads, as MXNet's --data-threads and its
// DataLoader workers provide.
//
// Why: the training thread otherwise gathers every batch itself (one copy
// per sample from the shuffled index list) before each forward pass. Here
// workers do that while the training thread runs forward/backward and the
// allreduce. Fashion-MNIST is already decoded in memory, so assembling a
// batch is only batch_size conversions of 784 bytes to floats and the gain
// is small (a few percent at most); the loader matters once a dataset
// decodes or augments per sample, and the option is no longer a no-op.
//
// Determinism: batch `step` holds exactly the samples
// indices[step * batch_size, (step + 1) * batch_size), in that order, as the
// single-threaded loop assembled them, and next() hands batches out strictly
// in step order whatever the number of threads; training results (and the
// resume checksum) do not depend on --data-threads.
//
// Memory is bounded: min(2 x threads, steps) slots of one batch each, so
// workers run at most that many batches ahead of the consumer.
//
// Shutdown: the destructor stops the workers and joins every thread, also
// when the consumer stops early or unwinds from an exception; a worker
// finishes at most the batch it is copying. No thread is detached.
//
// Errors: an exception in a worker (e.g. an index outside the dataset) is
// rethrown by next() for that batch's step, after every earlier batch was
// handed out; no later batch is handed out after it.
//
// Thread safety: one consumer thread calls next(). The dataset and the index
// list must outlive the loader and not change while it exists.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "herd_train/idx_dataset.h"

namespace herd_train {

class BatchLoader {
 public:
  struct Batch {
    int64_t step = -1;
    std::vector<float> inputs;    // [batch_size][features()], pixels_to_inputs of the samples
    std::vector<uint8_t> labels;  // [batch_size]
  };

  // Batches 0 .. steps-1 of `batch_size` samples from `indices` (which must
  // hold at least steps * batch_size entries), on `threads` workers. Throws
  // herd::Error for batch_size < 1, steps < 0, threads < 1 or too few indices.
  BatchLoader(const Dataset& data, const std::vector<int64_t>& indices, int64_t batch_size,
              int64_t steps, int threads);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next batch in step order (0, 1, ...), blocking until a worker has
  // assembled it. The reference stays valid until the next call to next() or
  // the destructor. Rethrows a worker's exception for that step; throws
  // herd::Error after the last step.
  const Batch& next();

  int64_t steps() const { return steps_; }
  int threads() const { return static_cast<int>(workers_.size()); }
  int slots() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    Batch batch;
    bool ready = false;
  };

  void work();
  void assemble(int64_t step, Batch& batch) const;
  void shutdown();

  const Dataset& data_;
  const std::vector<int64_t>& indices_;
  const int64_t batch_size_;
  const int64_t steps_;

  std::mutex mutex_;
  std::condition_variable space_;   // workers wait for a free slot
  std::condition_variable filled_;  // the consumer waits for its batch
  std::vector<Slot> slots_;         // step s lives in slots_[s % slots_.size()]
  int64_t next_claim_ = 0;          // the next step a worker takes
  int64_t released_ = 0;            // steps < released_ are done with; their slots are free
  int64_t next_step_ = 0;           // the step next() returns
  bool stop_ = false;
  int64_t error_step_ = -1;  // the earliest step whose assembly threw, or -1
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

}  // namespace herd_train
