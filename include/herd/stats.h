// herd::stats(): what this rank's collectives have done since herd::init, per
// collective kind and process set, for a job's operators (docs/operations.md,
// "Counters"). HERD_STATS=1 prints the same figures on every rank at shutdown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd {

// The operations of one collective kind on one process set, on this rank.
struct CollectiveStats {
  // "allreduce", "allgather", "broadcast", "alltoall", "reducescatter",
  // "barrier" or "grouped allreduce" (one operation per group call).
  std::string collective;
  int process_set = 0;  // the set's id (0: every rank)
  int64_t count = 0;    // operations completed successfully
  int64_t failed = 0;   // operations completed with an error
  // Bytes of this rank's inputs of the successful operations (all members'
  // for a grouped allreduce).
  int64_t bytes = 0;
  // Runs of the collective algorithm for the successful operations: fused
  // operations share one run, so runs <= count.
  int64_t runs = 0;
  // Seconds from submission to completion, summed over the successful
  // operations: the negotiation, the wait for other ranks and the run.
  double total_seconds = 0;
  // Seconds of the runs themselves (from the start of a run to the
  // completion of its first operation), each run counted once.
  double run_seconds = 0;
};

// This rank's counters since herd::init, ordered by process set and then by
// collective (in the order above); kinds without any operation are left out.
// Readable after herd::shutdown (the last job's) until the next herd::init.
std::vector<CollectiveStats> stats();

// `stats` as the text HERD_STATS=1 prints for `rank`: a header line, then one
// line per entry (process set, collective, count, failed, bytes, runs, total
// and run milliseconds, mean microseconds per operation).
std::string format_stats(int rank, const std::vector<CollectiveStats>& stats);

}  // namespace herd
