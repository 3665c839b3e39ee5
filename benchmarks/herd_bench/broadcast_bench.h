// herd-bench's broadcast sweep: for each size, times the same broadcast from
// one root over several paths (herd's runtime, the binomial tree and the
// pipelined chain alone, raw MPI) and a memcpy ceiling, checks every element
// of each result, and prints one row per path (table.h).
//
// Called by herd-bench's main thread on every rank, collectively, after
// herd::init(); MPI must be initialized with MPI_THREAD_MULTIPLE, since herd's
// background thread uses MPI while this thread does.
#pragma once

#include <mpi.h>

#include <cstdint>

#include <CLI/CLI.hpp>

#include "benchmarks/herd_bench/cli_options.h"

namespace herd::bench {

struct BroadcastBenchOptions : SweepOptions {
  int root = 0;  // -r: the rank whose buffer is broadcast
};

// Adds the "broadcast" subcommand, whose options land in `options`.
CLI::App* add_broadcast_command(CLI::App& app, BroadcastBenchOptions& options);

// Runs the sweep on the ranks of `comm` (which must hold the same ranks as
// herd's global process set, in the same order) and returns the number of
// wrong elements over all sizes, paths and ranks, on every rank. Rank 0
// prints. Throws std::runtime_error (herd::Error from herd) on a failure,
// a root that is not a rank of `comm` included.
int64_t run_broadcast_bench(const BroadcastBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
