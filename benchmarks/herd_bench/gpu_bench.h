// herd-bench's GPU sweeps (--device cuda): the one point where shared code
// reaches the GPU code. CMake compiles the CUDA implementation
// (gpu_allreduce_bench.cc and its helpers) where herd is built with CUDA, and
// gpu_bench_cpu_only.cc, which refuses, where it is not; no other file of
// herd-bench knows which it got.
//
// Called by herd-bench's main thread on every rank: require_gpu before
// herd::init(), run_gpu_allreduce_bench after it (collectively, as
// run_allreduce_bench).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "benchmarks/herd_bench/allreduce_bench.h"

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

}  // namespace herd::bench
