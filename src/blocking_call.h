// BlockingCallScope: marks the submissions of herd's blocking calls
// (herd::allreduce and friends, which wait at once on what they submit).
//
// Such a submission does not wake the background thread: the caller is about
// to run the cycle itself (cycle_driver.h), and a woken background thread
// would only contend with it for the cycle lock and the core. An
// asynchronous submission wakes it, since nobody may wait for a long time.
// Per thread; scopes do not nest.
#pragma once

namespace herd::detail {

class BlockingCallScope {
 public:
  BlockingCallScope() { active_ = true; }
  ~BlockingCallScope() { active_ = false; }
  BlockingCallScope(const BlockingCallScope&) = delete;
  BlockingCallScope& operator=(const BlockingCallScope&) = delete;

  // True on a thread inside a scope.
  static bool active() { return active_; }

 private:
  static inline thread_local bool active_ = false;
};

}  // namespace herd::detail
