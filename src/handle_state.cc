#include "src/handle_state.h"

namespace herd::detail {

void HandleState::complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
  }
  done_cv_.notify_all();
}

bool HandleState::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

Status HandleState::wait() const {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return done_; });
  return status_;
}

}  // namespace herd::detail
