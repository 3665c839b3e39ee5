// Starting several of herd's collectives and waiting for them all, as the
// engines do for the keys of one call.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "herd/error.h"
#include "herd/herd.h"
#include "herd/kvstore.h"

namespace herd {
namespace kv {
namespace detail {

// Calls start(i) for i in [0, count) (each submits one collective and returns
// its handle) before waiting for any, so that herd can fuse them; then waits
// for every started one and throws the first failure. The buffers of a
// collective must outlive it even when another fails, hence no early return:
// a failed submission also waits for those already started.
inline void start_and_wait_all(std::size_t count, const std::function<Handle(std::size_t)>& start) {
  std::vector<Handle> handles;
  std::string first_error;
  for (std::size_t i = 0; i < count && first_error.empty(); ++i) {
    try {
      handles.push_back(start(i));
    } catch (const Error& e) {
      first_error = e.what();
    }
  }
  for (const Handle& handle : handles) {
    try {
      herd::wait(handle);
    } catch (const Error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (!first_error.empty()) throw Error(first_error);
}

// Stats of one allreduce of `bytes` over `workers`: a ring allreduce sends and
// receives 2 (W - 1) / W of the array on each worker, herd's cost model for
// the sum (docs/performance.md).
inline void add_ring_allreduce_bytes(Stats& stats, int64_t bytes, int workers) {
  const int64_t moved = workers > 1 ? 2 * (workers - 1) * bytes / workers : 0;
  stats.bytes_sent += moved;
  stats.bytes_received += moved;
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
