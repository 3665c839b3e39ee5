// HandleState: the completion state behind a herd::Handle.
//
// Created by the API thread that submits an operation, completed exactly once
// by the background thread (or by shutdown), waited on by any number of
// application threads. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

#include "common/status.h"

namespace herd::detail {

class HandleState {
 public:
  // `description` names the operation for messages: "allreduce 'grad/fc1'".
  explicit HandleState(std::string description) : description_(std::move(description)) {}

  const std::string& description() const { return description_; }

  // Records the outcome and wakes every waiter. A second completion is
  // ignored: the first outcome stands.
  void complete(Status status);

  bool done() const;
  // Blocks until complete (polling briefly first: spin_wait.h); returns the
  // outcome.
  Status wait() const;

 private:
  const std::string description_;
  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  bool done_ = false;
  Status status_;
  // done_, readable without the mutex, for the poll in wait().
  std::atomic<bool> done_published_{false};
};

}  // namespace herd::detail
