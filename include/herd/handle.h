// herd::Handle: the caller's side of one asynchronous operation.
//
// Returned by herd::allreduce_async and friends; copyable, cheap (a shared
// pointer to the completion state, which the background thread completes).
// Pass it to herd::poll or herd::wait from any thread. A handle stays usable
// after herd::shutdown: waiting on it then reports how the operation ended.
#pragma once

#include <memory>

namespace herd {

namespace detail {
class HandleState;
}  // namespace detail

class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}

  // False for a default-constructed handle, which no operation stands behind.
  bool valid() const { return state_ != nullptr; }
  const std::shared_ptr<detail::HandleState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::HandleState> state_;
};

}  // namespace herd
