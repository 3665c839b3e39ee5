// herd-bench's allreduce sweep: for each size, times the same allreduce over
// several paths (herd's runtime out of place and in place, the ring and
// shared-memory algorithms alone, raw MPI out of place and in place) and the
// memory-traffic floor (every rank's memcpy at once), checks every element of
// each result, and prints one row per path (table.h).
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

struct AllreduceBenchOptions : SweepOptions {
  ReduceOp op = ReduceOp::kSum;            // -o
  BenchDevice device = BenchDevice::kCpu;  // --device: cuda runs gpu_bench.h's sweep
};

// Adds the "allreduce" subcommand, whose options land in `options`.
CLI::App* add_allreduce_command(CLI::App& app, AllreduceBenchOptions& options);

// Runs the sweep on the ranks of `comm` (which must hold the same ranks as
// herd's global process set, in the same order) and returns the number of
// wrong elements over all sizes, paths and ranks, on every rank. Rank 0
// prints. Throws std::runtime_error (herd::Error from herd) on a failure.
// With --device cuda this is run_gpu_allreduce_bench (gpu_bench.h), whose
// caller has checked require_gpu first.
int64_t run_allreduce_bench(const AllreduceBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
