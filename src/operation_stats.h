// OperationStats: the counters behind herd::stats() (include/herd/stats.h).
//
// The background loop of every process set records each operation it
// completes, and each run of a collective algorithm once; the API reads a
// snapshot. One process-wide instance (process_stats()), cleared at
// herd::init. Thread-safe: the loops of several process sets record at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "herd/stats.h"
#include "src/message.h"

namespace herd::detail {

class OperationStats {
 public:
  using Duration = std::chrono::steady_clock::duration;

  // One operation of `type` on set `set_id` completed; `bytes` of input and
  // `since_submission` count only when `ok`.
  void record_operation(int set_id, CollectiveType type, bool ok, int64_t bytes,
                        Duration since_submission);
  // One run of the algorithm, which took `run_time`.
  void record_run(int set_id, CollectiveType type, Duration run_time);

  std::vector<CollectiveStats> snapshot() const;
  void clear();

 private:
  struct Counters {
    int64_t count = 0;
    int64_t failed = 0;
    int64_t bytes = 0;
    int64_t runs = 0;
    Duration total{0};
    Duration run{0};
  };
  mutable std::mutex mutex_;
  std::map<std::pair<int, CollectiveType>, Counters> counters_;
};

OperationStats& process_stats();

}  // namespace herd::detail
