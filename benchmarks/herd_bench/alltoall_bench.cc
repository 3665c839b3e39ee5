#include "benchmarks/herd_bench/alltoall_bench.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/bench_sweep.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "collectives/alltoall.h"
#include "collectives/mpi/mpi_transport.h"

namespace herd::bench {

// The paths, in the order of their rows, each from p blocks of `block`
// elements, block d for rank d (input), to p blocks, block s from rank s
// (output):
//   herd:     herd::alltoall with even splits, the whole runtime (enqueue,
//             negotiate, then the pairwise exchange), into a herd::Tensor
//             that herd allocates on every call.
//   pairwise: collectives::pairwise_alltoallv alone over an MpiTransport on
//             its own communicator, input -> output, with equal blocks.
//   mpi:      MPI_Alltoall(input, output) on the same buffers.
//   memcpy:   rank 0 alone copies as many bytes (bench_sweep.h).
// Block d of rank s's input is block_value(..., source s, block d, i), so
// block s of rank r's output must hold block_value(..., source s, block r, i).

CLI::App* add_alltoall_command(CLI::App& app, AlltoallBenchOptions& options) {
  CLI::App* command = app.add_subcommand("alltoall", "Alltoall bandwidth sweep");
  add_sweep_options(*command, options);
  return command;
}

int64_t run_alltoall_bench(const AlltoallBenchOptions& options, MPI_Comm comm) {
  const Sweep sweep = open_sweep(options, comm);
  const int ranks = sweep.ranks;
  const DataType dtype = options.dtype;

  // The exchange's own communicator, so that its tags never meet herd's or
  // ours. Declared before the transport, so that it outlives it.
  DupComm pairwise_comm(comm);
  collectives::MpiTransport transport(pairwise_comm.get());
  const int64_t element_bytes = static_cast<int64_t>(element_size(dtype));
  const MPI_Datatype type = mpi_type(dtype);

  print_preamble(sweep, "alltoall", "", "algbw * (p-1)/p",
                 {"size: one rank's send buffer, p blocks; count: the elements of one block"});
  return for_each_size(sweep, [&](int64_t size) {
    // One block per rank of at least one element; the size is rounded down.
    const int64_t block = std::max<int64_t>(1, size / element_bytes / ranks);
    const int64_t block_bytes = block * element_bytes;
    const int64_t bytes = block_bytes * ranks;
    std::vector<unsigned char> input(bytes), output(bytes);
    for (int dest = 0; dest < ranks; ++dest) {
      fill_block(dtype, ranks, ranks, sweep.rank, dest, input.data() + dest * block_bytes, block);
    }
    Tensor result;
    const SizeRun run(sweep, {bytes, block, "", block_exchange_bus_factor(ranks)}, [&] {
      poison(output);
      result = Tensor();
    });
    // Block s of `received` (null: wrong shape, all wrong) against what rank
    // s sent to this rank.
    const auto wrong_in = [&](const void* received, const char* path) {
      if (received == nullptr) return bytes / element_bytes;
      int64_t wrong = 0;
      for (int source = 0; source < ranks; ++source) {
        wrong += count_wrong_block(
            dtype, ranks, ranks, source, sweep.rank, sweep.rank,
            static_cast<const unsigned char*>(received) + source * block_bytes, block, path);
      }
      return wrong;
    };
    void* const in = input.data();
    void* const out = output.data();

    const std::string name = "herd-bench/alltoall/" + std::to_string(bytes);
    int64_t wrong = run.measure(
        "herd",
        [&] {
          herd::alltoall(name, TensorView{in, dtype, {block * ranks}}, {}, &result);
        },
        [&] {
          return wrong_in(result_data(result, dtype, block * ranks, sweep.rank, "herd"), "herd");
        });
    const std::vector<int64_t> block_bytes_per_rank(ranks, block_bytes);
    wrong += run.measure(
        "pairwise",
        [&] {
          throw_if_failed(collectives::pairwise_alltoallv(in, block_bytes_per_rank, out,
                                                          block_bytes_per_rank, transport),
                          "pairwise_alltoallv");
        },
        [&] { return wrong_in(out, "pairwise"); });
    if (type != MPI_DATATYPE_NULL && block <= INT_MAX) {
      wrong += run.measure(
          "mpi",
          [&] {
            const int n = static_cast<int>(block);
            HERD_MPI_CHECK(MPI_Alltoall(in, n, type, out, n, type, comm));
          },
          [&] { return wrong_in(out, "mpi"); });
    }
    run.measure_memcpy();
    return wrong;
  });
}

}  // namespace herd::bench
