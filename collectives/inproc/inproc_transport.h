// In-process transport: N threads play N ranks over shared mailboxes.
//
// Used by the unit tests so that every algorithm in collectives/ is exercised
// for many rank counts without MPI. Sends are eager (the bytes are copied at
// isend), receives block in wait() until a matching message arrives or the
// fabric's timeout passes, so a broken algorithm fails instead of hanging.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "collectives/transport.h"

namespace herd::collectives {

class InprocFabric {
 public:
  explicit InprocFabric(int size,
                        std::chrono::milliseconds receive_timeout = std::chrono::seconds(30));
  ~InprocFabric();
  InprocFabric(const InprocFabric&) = delete;
  InprocFabric& operator=(const InprocFabric&) = delete;

  int size() const;
  // The transport of one rank; the fabric must outlive it.
  std::unique_ptr<Transport> transport(int rank);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Runs body(rank, transport) on `size` threads over a fresh fabric and joins
// them all; an exception thrown by any body is rethrown (the first one).
void run_inproc_ranks(int size, const std::function<void(int rank, Transport& transport)>& body);

}  // namespace herd::collectives
