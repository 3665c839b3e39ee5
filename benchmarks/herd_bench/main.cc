// herd-bench: nccl-tests-style bandwidth tables for herd's collectives.
//
//   mpirun -np N herd-bench allreduce -b 4K -e 64M -f 4 -d float32 -o sum -n 20 -w 5 [--csv]
//
// For each size from -b to -e (times -f each step), one row per path (herd's
// runtime, the ring alone, raw MPI, a memcpy ceiling) with the slowest rank's
// time, algbw, busbw and the number of wrong elements. Exits 1 if any element
// was wrong, 2 on a failure. docs/benchmarks.md explains the columns.
// The subcommands allgather, broadcast [-r ROOT], reducescatter [-o OP] and
// alltoall take the same sweep options and print the same table.
//
//   mpirun -np N herd-bench step --model resnet50 -n 10 -w 3 [--backward-ms 0]
//
// times one training step's gradients of a real model instead (step_bench.h).
//
//   mpirun -np N herd-bench kvstore [--gradient-compression 2bit] [--types dist_sync,...]
//
// pushes and pulls them through each KVStore type, beside herd's allreduce of
// the same gradients (kvstore_bench.h); with HERD_NUM_SERVERS=S the last S
// ranks are dist_async's servers and never return from herd::init.
//
// `herd-bench allreduce --device cuda` runs the sweep on GPU buffers against
// raw NCCL, MPI staged through host memory and a device-to-device copy, and
// `herd-bench step --device cuda` the step against raw NCCL (gpu_bench.h);
// both exit 77 where no CUDA device is visible. `herd-bench fusion` times the
// GPU fusion buffer's pack and unpack against a device-to-device copy.
//
// The program initializes MPI itself with MPI_THREAD_MULTIPLE, so that a bad
// command line ends cleanly before herd starts; herd::init then uses this MPI
// and leaves MPI_Finalize to main.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include <herd/herd.h>

#include "benchmarks/herd_bench/allgather_bench.h"
#include "benchmarks/herd_bench/allreduce_bench.h"
#include "benchmarks/herd_bench/alltoall_bench.h"
#include "benchmarks/herd_bench/broadcast_bench.h"
#include "benchmarks/herd_bench/cli_options.h"
#include "benchmarks/herd_bench/gpu_bench.h"
#include "benchmarks/herd_bench/kvstore_bench.h"
#include "benchmarks/herd_bench/reducescatter_bench.h"
#include "benchmarks/herd_bench/step_bench.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  CLI::App app{"herd-bench: time herd's collectives against the ring alone, MPI and memcpy."};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  // One options struct per subcommand; the one given on the command line runs.
  herd::bench::AllreduceBenchOptions allreduce_options;
  CLI::App* allreduce = herd::bench::add_allreduce_command(app, allreduce_options);
  herd::bench::AllgatherBenchOptions allgather_options;
  CLI::App* allgather = herd::bench::add_allgather_command(app, allgather_options);
  herd::bench::BroadcastBenchOptions broadcast_options;
  CLI::App* broadcast = herd::bench::add_broadcast_command(app, broadcast_options);
  herd::bench::ReducescatterBenchOptions reducescatter_options;
  CLI::App* reducescatter = herd::bench::add_reducescatter_command(app, reducescatter_options);
  herd::bench::AlltoallBenchOptions alltoall_options;
  CLI::App* alltoall = herd::bench::add_alltoall_command(app, alltoall_options);
  herd::bench::StepBenchOptions step_options;
  CLI::App* step = herd::bench::add_step_command(app, step_options);
  herd::bench::FusionBenchOptions fusion_options;
  CLI::App* fusion = herd::bench::add_fusion_command(app, fusion_options);
  herd::bench::KvstoreBenchOptions kvstore_options;
  CLI::App* kvstore = herd::bench::add_kvstore_command(app, kvstore_options);
  try {
    app.parse(argc, argv);
    if (allreduce->parsed()) herd::bench::validate_sweep_options(allreduce_options);
    if (allgather->parsed()) herd::bench::validate_sweep_options(allgather_options);
    if (broadcast->parsed()) herd::bench::validate_sweep_options(broadcast_options);
    if (reducescatter->parsed()) herd::bench::validate_sweep_options(reducescatter_options);
    if (alltoall->parsed()) herd::bench::validate_sweep_options(alltoall_options);
    if (kvstore->parsed()) herd::bench::validate_kvstore_options(kvstore_options);
  } catch (const CLI::ParseError& e) {
    std::ostringstream discard;  // every rank parses; rank 0 alone prints
    const int code = rank == 0 ? app.exit(e) : app.exit(e, discard, discard);
    MPI_Finalize();
    return code;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) std::fprintf(stderr, "herd-bench: MPI lacks MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 2;
  }

  // --device cuda needs a GPU on every rank and a build with CUDA; without
  // either it ends here (exit code 77 without a device, 2 without CUDA).
  const bool on_gpu =
      (allreduce->parsed() && allreduce_options.device == herd::bench::BenchDevice::kCuda) ||
      (step->parsed() && step_options.device == herd::bench::BenchDevice::kCuda) ||
      fusion->parsed();
  if (on_gpu) {
    const int code = herd::bench::require_gpu(MPI_COMM_WORLD);
    if (code != 0) {
      MPI_Finalize();
      return code;
    }
  }

  MPI_Comm comm;  // the benchmark's own barriers, reductions and MPI path
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int64_t wrong = 0;
  try {
    herd::init();
    if (allreduce->parsed()) wrong = herd::bench::run_allreduce_bench(allreduce_options, comm);
    if (allgather->parsed()) wrong = herd::bench::run_allgather_bench(allgather_options, comm);
    if (broadcast->parsed()) wrong = herd::bench::run_broadcast_bench(broadcast_options, comm);
    if (reducescatter->parsed()) {
      wrong = herd::bench::run_reducescatter_bench(reducescatter_options, comm);
    }
    if (alltoall->parsed()) wrong = herd::bench::run_alltoall_bench(alltoall_options, comm);
    if (step->parsed()) wrong = herd::bench::run_step_bench(step_options, comm);
    if (fusion->parsed()) wrong = herd::bench::run_gpu_fusion_bench(fusion_options, comm);
    if (kvstore->parsed()) wrong = herd::bench::run_kvstore_bench(kvstore_options, comm);
    herd::shutdown();
  } catch (const std::exception& e) {
    // A rank that fails alone would leave the others waiting: stop the job.
    std::fprintf(stderr, "herd-bench: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0 && wrong > 0) {
    std::fprintf(stderr, "herd-bench: FAILED: %lld wrong elements in all\n",
                 static_cast<long long>(wrong));
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return wrong > 0 ? 1 : 0;
}
