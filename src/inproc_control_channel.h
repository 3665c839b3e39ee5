// In-process control channel: N threads play the N ranks of one process set.
//
// Used by the unit tests so that BackgroundLoop runs, with its negotiation,
// response cache, join and shutdown, without MPI; the data moves over
// collectives/inproc. Each call is a rendezvous: a rank's k-th call meets the
// k-th call of every other rank, and returns once all of them have made it.
//
// A rank never hangs: a call that waits longer than the world's timeout
// fails, naming the ranks it waited for, and aborts the world, so the ranks
// already waiting fail with the same reason instead of waiting out their own
// timeouts. abort() does the same on purpose, for a test that makes a rank
// fail or vanish; every call after an abort fails with its reason.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "src/control_channel.h"

namespace herd::detail {

class InprocControlWorld {
 public:
  explicit InprocControlWorld(int size,
                              std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~InprocControlWorld();
  InprocControlWorld(const InprocControlWorld&) = delete;
  InprocControlWorld& operator=(const InprocControlWorld&) = delete;

  int size() const;
  // The channel of one rank, used by one thread at a time.
  std::unique_ptr<ControlChannel> channel(int rank);

  // Every call in progress or made later, on any rank, fails with `reason`
  // (the first abort's reason stands). Any thread.
  void abort(const std::string& reason);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace herd::detail
