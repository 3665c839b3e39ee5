// herd-bench's GPU sweeps (--device cuda): the one point where shared code
// reaches the GPU code. CMake compiles the CUDA implementation
// (gpu_allreduce_bench.cc and its helpers) where herd is built with CUDA, and
// gpu_bench_cpu_only.cc, which refuses, where it is not; no other file of
// herd-bench knows which it got.
//
// Called by herd-bench's main thread on every rank: require_gpu before
// herd::init(), the run_gpu_* functions after it (collectively, as their CPU
// counterparts).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "benchmarks/herd_bench/allreduce_bench.h"
#include "benchmarks/herd_bench/step_bench.h"

namespace herd::bench {

// herd-bench's exit code when --device cuda finds no CUDA device: CTest's
// skip code, as for herd's GPU tests (tests/gpu/gpu_test_skip.h).
constexpr int kExitNoDevice = 77;
// Its exit code for a failure, as elsewhere in herd-bench.
constexpr int kExitFailure = 2;

// What this process can do with --device cuda.
struct GpuProbe {
  int exit_code = 0;    // 0: a device is visible; kExitNoDevice; kExitFailure (no CUDA built)
  std::string message;  // why not, for stderr ("" when exit_code is 0)
};

// This process alone: whether herd-bench was built with CUDA and a device is
// visible. Never throws. Implemented by the CUDA or the CPU-only file.
GpuProbe probe_gpu();

// Collective over `comm`: every rank probes, and all agree on the worst
// result, so that no rank starts a sweep the others refuse. Returns 0 when
// every rank has a device; otherwise rank 0 has printed why to stderr and
// the caller exits with the returned code.
int require_gpu(MPI_Comm comm);

// The allreduce sweep on GPU buffers: herd::allreduce on cudaMalloc'ed
// memory of the device local_rank() % (visible devices), against raw
// ncclAllReduce (where NCCL is built and every rank has a GPU of its own),
// an MPI_Allreduce staged through pinned host memory, and a device-to-device
// copy ceiling; every element of every path's result is copied back and
// checked as for the CPU rows. Returns the wrong elements over all sizes,
// paths and ranks, on every rank. Throws std::runtime_error on a failure.
int64_t run_gpu_allreduce_bench(const AllreduceBenchOptions& options, MPI_Comm comm);

// herd-bench fusion: the device fusion buffer's pack and unpack (herd's
// batched copy kernel) against one device-to-device copy of as many bytes,
// for ResNet-50's and BERT-base's gradients and for many tensors of one size
// (gpu_fusion_bench.cc). GPU only; rank 0 alone measures.
struct FusionBenchOptions {
  int iterations = 50;  // -n: timed calls per row
  int warmup = 5;       // -w: untimed calls before them
  bool csv = false;     // CSV on stdout instead of the aligned table
};

// Adds the "fusion" subcommand, whose options land in `options`.
CLI::App* add_fusion_command(CLI::App& app, FusionBenchOptions& options);

// Returns the bytes that pack or unpack got wrong (0 on ranks other than 0).
int64_t run_gpu_fusion_bench(const FusionBenchOptions& options, MPI_Comm comm);

// The step benchmark on GPU buffers (step --device cuda, gpu_step_bench.cc):
// a model's gradients through herd against raw ncclAllReduce over one flat
// buffer (in and out of place) and per gradient. Returns the wrong elements
// over all paths and ranks, on every rank; shuts herd down and starts it
// again in between, as run_step_bench does.
int64_t run_gpu_step_bench(const StepBenchOptions& options, MPI_Comm comm);

}  // namespace herd::bench
