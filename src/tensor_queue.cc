#include "src/tensor_queue.h"

#include <fmt/format.h>

#include "src/spin_wait.h"

namespace herd::detail {

Status TensorQueue::push(TensorEntry entry, bool wake_waiter) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_)
      return Status::error(fmt::format("{}: {}", entry.handle->description(), close_reason_));
    if (!pending_names_.insert(entry.request.name).second) {
      return Status::invalid_argument(fmt::format(
          "{}: a request with this name is still pending on rank {}; wait for it before "
          "submitting the name again",
          entry.handle->description(), rank_label_));
    }
    entries_.push_back(std::move(entry));
    if (wake_waiter) has_work_.store(true, std::memory_order_release);
  }
  if (wake_waiter) work_cv_.notify_one();
  return Status::ok();
}

bool TensorQueue::has_work() {
  if (has_work_.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return !entries_.empty();
}

std::vector<TensorEntry> TensorQueue::drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TensorEntry> drained;
  drained.swap(entries_);
  woken_ = false;
  has_work_.store(false, std::memory_order_relaxed);
  return drained;
}

void TensorQueue::wait_for_work(std::chrono::microseconds timeout, std::chrono::microseconds spin) {
  if (spin.count() > 0 &&
      spin_until([this] { return has_work_.load(std::memory_order_acquire); }, spin)) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_cv_.wait_for(lock, timeout, [this] { return woken_ || !entries_.empty(); });
}

void TensorQueue::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
    has_work_.store(true, std::memory_order_release);
  }
  work_cv_.notify_one();
}

void TensorQueue::finish(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_names_.erase(name);
}

std::vector<TensorEntry> TensorQueue::close(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!closed_) {
    closed_ = true;
    close_reason_ = reason;
  }
  std::vector<TensorEntry> left;
  left.swap(entries_);
  for (const TensorEntry& entry : left) pending_names_.erase(entry.request.name);
  return left;
}

}  // namespace herd::detail
