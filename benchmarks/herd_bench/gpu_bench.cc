// gpu_bench.h's shared part: the ranks' agreement on the probe, and the
// fusion subcommand's options. Compiled in every build; the probe and the
// benchmarks themselves are the CUDA or the CPU-only files'.
#include "benchmarks/herd_bench/gpu_bench.h"

#include <cstdio>

#include "benchmarks/herd_bench/bench_mpi.h"

namespace herd::bench {

CLI::App* add_fusion_command(CLI::App& app, FusionBenchOptions& options) {
  CLI::App* command = app.add_subcommand(
      "fusion", "GPU fusion buffer: pack and unpack against a device-to-device copy (GPU only)");
  command->add_option("-n,--iters", options.iterations, "Timed calls per row")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("-w,--warmup_iters", options.warmup, "Untimed calls before them")
      ->check(CLI::Range(0, 1 << 20));
  command->add_flag("--csv", options.csv, "Print the table as CSV on stdout (notes on stderr)");
  return command;
}

int require_gpu(MPI_Comm comm) {
  const GpuProbe local = probe_gpu();
  // Every rank returns the largest code. Ranks of one executable agree on
  // whether CUDA is built, so the codes can only differ in kExitNoDevice.
  int worst = 0;
  HERD_MPI_CHECK(MPI_Allreduce(&local.exit_code, &worst, 1, MPI_INT, MPI_MAX, comm));
  if (worst == 0) return 0;
  int rank = 0;
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank == 0) {
    const std::string why =
        local.exit_code != 0 ? local.message : "another rank has no CUDA device";
    std::fprintf(stderr, "herd-bench: --device cuda: %s\n", why.c_str());
  }
  return worst;
}

}  // namespace herd::bench
