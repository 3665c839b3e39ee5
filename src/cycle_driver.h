// CycleDriver: lets a thread that waits for an operation run the background
// loop's cycles itself.
//
// Why: with the background thread alone doing the work, a lone blocking
// allreduce costs two thread hand-offs (the caller wakes the background
// thread, which wakes the caller back), and with a rank's threads sharing one
// core each hand-off is a context switch: together most of a small
// allreduce's time (docs/design/waiters-drive.md). A waiter that runs the
// cycle on its own thread pays neither. Whoever runs a cycle holds the loop's
// cycle lock, so cycles never overlap, whichever threads run them.
#pragma once

namespace herd::detail {

class HandleState;

class CycleDriver {
 public:
  virtual ~CycleDriver() = default;

  // Runs cycles on the calling thread until `handle` is complete, while no
  // other thread is running one; otherwise waits for that thread's cycles.
  // Returns once the handle is complete or the loop has stopped (whoever
  // stopped it completes every pending handle).
  virtual void drive_until_done(const HandleState& handle) = 0;
};

}  // namespace herd::detail
