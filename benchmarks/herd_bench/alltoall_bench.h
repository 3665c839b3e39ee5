// herd-bench's alltoall sweep: for each size, times the same alltoall over
// several paths (herd's runtime, the pairwise exchange alone, raw MPI) and a
// memcpy ceiling, checks every element of each result, and prints one row per
// path (table.h). The size is one rank's send buffer, p blocks, as in
// nccl-tests.
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

struct AlltoallBenchOptions : SweepOptions {};

// Adds the "alltoall" subcommand, whose options land in `options`.
CLI::App* add_alltoall_command(CLI::App& app, AlltoallBenchOptions& options);

// Runs the sweep on the ranks of `comm` (which must hold the same ranks as
// herd's global process set, in the same order) and returns the number of
// wrong elements over all sizes, paths and ranks, on every rank. Rank 0
// prints. Throws std::runtime_error (herd::Error from herd) on a failure.
int64_t run_alltoall_bench(const AlltoallBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
