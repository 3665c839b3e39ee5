#include "src/handle_state.h"

#include "src/spin_wait.h"

namespace herd::detail {

void HandleState::complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
    done_published_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
}

bool HandleState::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

Status HandleState::wait() const {
  if (const std::shared_ptr<CycleDriver> driver = driver_.lock()) driver->drive_until_done(*this);
  spin_until([this] { return done_published_.load(std::memory_order_acquire); },
             kSpinBeforeBlocking);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return done_; });
  return status_;
}

bool HandleState::wait_for(std::chrono::microseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return done_cv_.wait_for(lock, timeout, [this] { return done_; });
}

}  // namespace herd::detail
