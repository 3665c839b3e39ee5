// herd-bench's step benchmark: the gradients of a real model (model_shapes.h)
// submitted as a backward pass produces them, timed per training step, over
// herd's runtime (with and without fusion, out of place and in place) and
// over three raw MPI baselines, beside the memory-traffic floor (every rank
// copying its gradients at once); every element of the last step of each
// reducing path is checked. docs/benchmarks.md describes the paths and
// columns.
//
// Called by herd-bench's main thread on every rank, collectively, after
// herd::init(); MPI must be initialized by the program (not by herd) with
// MPI_THREAD_MULTIPLE. The benchmark shuts herd down and starts it again
// (with HERD_FUSION_THRESHOLD=0, then as before) in between; herd is running
// again when it returns.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "benchmarks/herd_bench/cli_options.h"
#include "benchmarks/herd_bench/model_shapes.h"

namespace herd::bench {

struct StepBenchOptions {
  Model model = Model::kResNet50;  // --model
  int iterations = 10;             // -n: timed steps per path
  int warmup = 3;                  // -w: untimed steps before them
  // --backward-ms: the backward compute of one step, spread over the
  // gradients in proportion to their sizes and spent asleep (it stands for a
  // GPU's work, which leaves the CPU to the communication). 0: communication
  // alone.
  double backward_ms = 0;
  // --device: cuda reduces GPU buffers instead (gpu_step_bench.cc), against
  // raw NCCL.
  BenchDevice device = BenchDevice::kCpu;
  bool csv = false;  // CSV on stdout instead of the aligned table
  // --progress (-q: never): rank 0's path lines and steps on stderr.
  ProgressMode progress = ProgressMode::kAuto;
};

// Adds the "step" subcommand, whose options land in `options`.
// --model: the model whose gradients a step moves, by name, case-insensitively
// (shared by the step and kvstore commands).
void add_model_option(CLI::App& command, Model& model, const std::string& help);

CLI::App* add_step_command(CLI::App& app, StepBenchOptions& options);

// Runs every path on the ranks of `comm` (the same ranks as herd's global
// process set, in the same order) and returns the number of wrong elements
// over all paths and ranks, on every rank. Rank 0 prints. Throws
// std::runtime_error (herd::Error from herd) on a failure.
int64_t run_step_bench(const StepBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
