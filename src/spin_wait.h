// spin_until: polls a condition for a short, bounded time before a caller
// falls back to blocking on a condition variable.
//
// Why: a blocked thread is woken through the kernel, which on a virtual
// machine can take tens of microseconds, twice per lone allreduce (the
// submitter wakes the background thread, which wakes the submitter). When the
// answer is expected within microseconds, polling for it is cheaper. The
// poll yields between checks so that, with more threads than cores, the
// thread being waited for can run. Any thread; no state.
#pragma once

#include <chrono>
#include <thread>

namespace herd::detail {

// How long a waiter polls before it blocks: about the time of a small
// allreduce on one machine, so that a back-to-back sequence of them never
// blocks, while a thread with nothing coming soon gives up the core quickly.
constexpr std::chrono::microseconds kSpinBeforeBlocking{50};

// Returns true as soon as `ready()` is true, or false once `limit` has passed.
template <typename Ready>
bool spin_until(Ready&& ready, std::chrono::microseconds limit) {
  if (ready()) return true;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    if (ready()) return true;
  }
  return false;
}

}  // namespace herd::detail
