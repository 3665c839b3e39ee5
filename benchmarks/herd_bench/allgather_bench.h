// herd-bench's allgather sweep: for each size, times the same allgather over
// several paths (herd's runtime, the ring algorithm alone, raw MPI) and a
// memcpy ceiling, checks every element of each result, and prints one row per
// path (table.h). The size is the gathered buffer, p blocks of one rank's
// input each, as in nccl-tests.
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

struct AllgatherBenchOptions : SweepOptions {};

// Adds the "allgather" subcommand, whose options land in `options`.
CLI::App* add_allgather_command(CLI::App& app, AllgatherBenchOptions& options);

// Runs the sweep on the ranks of `comm` (which must hold the same ranks as
// herd's global process set, in the same order) and returns the number of
// wrong elements over all sizes, paths and ranks, on every rank. Rank 0
// prints. Throws std::runtime_error (herd::Error from herd) on a failure.
int64_t run_allgather_bench(const AllgatherBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
