// herd::stats() (include/herd/stats.h): the runtime's counters, readable
// without a running herd (after shutdown they are the last job's).
#include "herd/stats.h"

#include "src/operation_stats.h"

namespace herd {

std::vector<CollectiveStats> stats() { return detail::process_stats().snapshot(); }

}  // namespace herd
