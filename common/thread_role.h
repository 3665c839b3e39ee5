// Whether the calling thread is one of herd's own (a process set's background
// thread), as opposed to an application thread that herd borrows for a call
// or to drive its cycles.
//
// The GPU path asks: herd's own threads keep the CUDA device herd makes
// current on them, while an application thread gets its previous device back
// after each call (common/cuda/device_guard.h). Restoring on herd's threads
// would make device 0 current again after each call, and since CUDA 12 that
// creates a context on GPU 0 in every rank.
#pragma once

namespace herd::detail {

// Set once, by the thread itself, when it starts.
inline bool& herd_owned_thread() {
  thread_local bool owned = false;
  return owned;
}

}  // namespace herd::detail
