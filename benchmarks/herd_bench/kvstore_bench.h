// herd-bench's kvstore benchmark: one training step's gradients of a real
// model (model_shapes.h) pushed to and pulled from a KVStore (herd/kvstore.h),
// per store type the launch offers, beside herd's own allreduce of the same
// gradients in the same run; with --gradient-compression, each store type
// that takes it once more with compression, with the bytes the store moved
// per step (KVStore::stats()). Every element of the last step of each row is
// checked. docs/benchmarks.md describes the rows and columns.
//
// Called by herd-bench's main thread on every worker rank, collectively,
// after herd::init(); MPI must be initialized by the program (not by herd)
// with MPI_THREAD_MULTIPLE. In a job with parameter-server ranks
// (HERD_NUM_SERVERS) herd::init does not return on the servers, so the
// benchmark runs on the workers alone.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "benchmarks/herd_bench/model_shapes.h"
#include "herd/train/progress.h"

namespace herd::bench {

struct KvstoreBenchOptions {
  Model model = Model::kResNet50;  // --model
  // --types: the store types to run, in this order; empty: horovod,
  // dist_sync, and dist_async when the job has server ranks.
  std::vector<std::string> types;
  std::string compression = "none";             // --gradient-compression: none, 2bit, 1bit
  double threshold = 0.5;                       // --threshold
  int iterations = 10;                          // -n: timed steps per row
  int warmup = 3;                               // -w: untimed steps before them
  bool csv = false;                             // CSV on stdout instead of the aligned table
  ProgressMode progress = ProgressMode::kAuto;  // --progress, -q: never
};

// Adds the "kvstore" subcommand, whose options land in `options`.
CLI::App* add_kvstore_command(CLI::App& app, KvstoreBenchOptions& options);

// Throws CLI::ValidationError when the threshold does not suit the check
// (kvstore_values.h's check_compression_threshold).
void validate_kvstore_options(const KvstoreBenchOptions& options);

// Runs every row on the worker ranks, which `comm` must hold first, in
// herd's rank order (MPI_COMM_WORLD's duplicate: the servers, if any, are its
// last ranks), and returns the number of wrong elements over all rows and
// workers, on every worker. Worker 0 prints. Throws std::runtime_error
// (herd::Error from herd) on a failure, e.g. dist_async asked for in a job
// without servers.
int64_t run_kvstore_bench(const KvstoreBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
