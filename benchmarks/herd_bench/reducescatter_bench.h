// herd-bench's reducescatter sweep: for each size, times the same
// reducescatter over several paths (herd's runtime, the ring algorithm alone,
// raw MPI) and a memcpy ceiling, checks every element of each result, and
// prints one row per path (table.h). The size is the reduced buffer, p blocks
// of one rank's result each, as in nccl-tests.
//
// Called by herd-bench's main thread on every rank, collectively, after
// herd::init(); MPI must be initialized with MPI_THREAD_MULTIPLE, since herd's
// background thread uses MPI while this thread does.
#pragma once

#include <mpi.h>

#include <cstdint>

#include <CLI/CLI.hpp>

#include "benchmarks/herd_bench/cli_options.h"
#include "herd/types.h"

namespace herd::bench {

struct ReducescatterBenchOptions : SweepOptions {
  ReduceOp op = ReduceOp::kSum;  // -o
};

// Adds the "reducescatter" subcommand, whose options land in `options`.
CLI::App* add_reducescatter_command(CLI::App& app, ReducescatterBenchOptions& options);

// Runs the sweep on the ranks of `comm` (which must hold the same ranks as
// herd's global process set, in the same order) and returns the number of
// wrong elements over all sizes, paths and ranks, on every rank. Rank 0
// prints. Throws std::runtime_error (herd::Error from herd) on a failure.
int64_t run_reducescatter_bench(const ReducescatterBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
