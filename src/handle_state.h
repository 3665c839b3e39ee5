// HandleState: the completion state behind a herd::Handle.
//
// Created by the API thread that submits an operation, completed exactly once
// by whichever thread runs the cycle that finishes it (the background thread
// or a waiter driving the loop: cycle_driver.h) or by shutdown, waited on by
// any number of application threads. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "src/cycle_driver.h"

namespace herd::detail {

class HandleState {
 public:
  // `description` names the operation for messages: "allreduce 'grad/fc1'".
  explicit HandleState(std::string description) : description_(std::move(description)) {}

  const std::string& description() const { return description_; }

  // The loop whose cycles complete this operation: wait() runs them on the
  // waiting thread while it lives. Set by the submitting thread before the
  // handle is shared with any other.
  void set_driver(std::weak_ptr<CycleDriver> driver) { driver_ = std::move(driver); }

  // Records the outcome and wakes every waiter. A second completion is
  // ignored: the first outcome stands.
  void complete(Status status);

  bool done() const;
  // Blocks until complete, running the driver's cycles meanwhile if it has
  // one, polling briefly before it blocks (spin_wait.h); returns the outcome.
  Status wait() const;
  // Blocks until complete or `timeout` has passed, without driving and
  // without polling first; true if complete.
  bool wait_for(std::chrono::microseconds timeout) const;

 private:
  const std::string description_;
  std::weak_ptr<CycleDriver> driver_;
  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  bool done_ = false;
  Status status_;
  // done_, readable without the mutex, for the poll in wait().
  std::atomic<bool> done_published_{false};
};

}  // namespace herd::detail
