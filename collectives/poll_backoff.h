// PollBackoff: how a thread that waits for other ranks paces its polls.
//
// A wait polls without pause for kPollBeforeYield (the healthy case: the
// peer answers within microseconds, and a yield or a sleep, being a system
// call, costs about as much as a whole small message between two ranks on
// one machine), then yields between polls until kSpinBeforeSleep, so that
// with more ranks than cores the peer can run at once (a sleeping waiter
// would make each of the shared-memory allreduce's many barriers cost a
// timer wake-up there, and such a peer commonly waits a scheduler time slice
// of a few milliseconds for its core), and then sleeps between polls,
// kFirstSleep at first
// and twice as long each time up to kLongestSleep. A rank that waits seconds
// for a slow peer thus uses a few percent of a core instead of all of it,
// and notices the answer at most kLongestSleep late.
//
// The slow checks of a wait (its deadline, the peers' liveness, fault
// notices) run only once the wait sleeps: after_fruitless_poll() says when.
// One object per wait; not shared between threads.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace herd::collectives {

class PollBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kPollBeforeYield{20};
  static constexpr std::chrono::microseconds kSpinBeforeSleep{10000};
  static constexpr std::chrono::microseconds kFirstSleep{50};
  static constexpr std::chrono::microseconds kLongestSleep{1000};
  // Reading the clock costs about as much as a poll: while spinning, look at
  // it only once per this many fruitless polls.
  static constexpr int64_t kPollsPerClockRead = 32;

  PollBackoff() = default;
  // A wait whose peers are often descheduled (the shared-memory allreduce's
  // barriers, where with more ranks than cores the peer may need this very
  // core) yields after `poll_before_yield` instead.
  explicit PollBackoff(std::chrono::microseconds poll_before_yield)
      : poll_before_yield_(poll_before_yield) {}

  // Call after a poll that found nothing new. Returns true once the wait has
  // started sleeping (after each sleep): the moment for the slow checks.
  bool after_fruitless_poll() {
    if (sleep_.count() == 0) {
      ++polls_;
      if (yielding_) std::this_thread::yield();
      if (polls_ % kPollsPerClockRead != 0) return false;
      const Clock::time_point now = Clock::now();
      if (polls_ == kPollsPerClockRead) {
        idle_since_ = now;
        return false;
      }
      const auto idle = now - idle_since_;
      if (idle < poll_before_yield_) return false;
      if (idle < kSpinBeforeSleep) {
        // From here on every fruitless poll yields: with more ranks than
        // cores, the peer may be waiting for this very core.
        yielding_ = true;
        return false;
      }
      sleep_ = kFirstSleep;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, kLongestSleep);
    return true;
  }

  // Call when a poll found progress: the next idle run starts spinning again.
  void after_progress() {
    polls_ = 0;
    yielding_ = false;
    sleep_ = std::chrono::microseconds{0};
  }

  // How long the current run of fruitless polls has lasted (meaningful once
  // after_fruitless_poll() has returned true).
  Clock::duration idle_for() const { return Clock::now() - idle_since_; }

 private:
  std::chrono::microseconds poll_before_yield_ = kPollBeforeYield;
  int64_t polls_ = 0;
  bool yielding_ = false;
  std::chrono::microseconds sleep_{0};
  Clock::time_point idle_since_{};
};

}  // namespace herd::collectives
