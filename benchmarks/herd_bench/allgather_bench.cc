#include "benchmarks/herd_bench/allgather_bench.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/bench_sweep.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "collectives/allgather.h"
#include "collectives/mpi/mpi_transport.h"

namespace herd::bench {

// The paths, in the order of their rows, each from a block of `block`
// elements per rank (input) to p blocks in rank order (output):
//   herd:   herd::allgather, the whole runtime (enqueue, negotiate, then the
//           ring), into a herd::Tensor that herd allocates on every call.
//   ring:   collectives::ring_allgatherv alone over an MpiTransport on its
//           own communicator, input -> output, with equal blocks.
//   mpi:    MPI_Allgather(input, output) on the same buffers.
//   memcpy: rank 0 alone copies as many bytes (bench_sweep.h).
// Rank r's input is block_value(..., source r, block 0, i); block s of every
// output must hold rank s's.

CLI::App* add_allgather_command(CLI::App& app, AllgatherBenchOptions& options) {
  CLI::App* command = app.add_subcommand("allgather", "Allgather bandwidth sweep");
  add_sweep_options(*command, options);
  return command;
}

int64_t run_allgather_bench(const AllgatherBenchOptions& options, MPI_Comm comm) {
  const Sweep sweep = open_sweep(options, comm);
  const int ranks = sweep.ranks;
  const DataType dtype = options.dtype;

  // The ring's own communicator, so that its tags never meet herd's or ours.
  // Declared before the transport, so that it outlives it.
  DupComm ring_comm(comm);
  collectives::MpiTransport transport(ring_comm.get());
  const int64_t element_bytes = static_cast<int64_t>(element_size(dtype));
  const MPI_Datatype type = mpi_type(dtype);

  print_preamble(sweep, "allgather", "", "algbw * (p-1)/p",
                 {"size: the gathered buffer, p blocks; count: the elements of one block"});
  return for_each_size(sweep, [&](int64_t size) {
    // One block per rank of at least one element; the size is rounded down.
    const int64_t block = std::max<int64_t>(1, size / element_bytes / ranks);
    const int64_t block_bytes = block * element_bytes;
    const int64_t bytes = block_bytes * ranks;
    std::vector<unsigned char> input(block_bytes), output(bytes);
    fill_block(dtype, ranks, 1, sweep.rank, 0, input.data(), block);
    Tensor result;
    const SizeRun run(sweep, {bytes, block, "", block_exchange_bus_factor(ranks)}, [&] {
      poison(output);
      result = Tensor();
    });
    // Every block of `gathered` (null: wrong shape, all wrong) against its rank's input.
    const auto wrong_in = [&](const void* gathered, const char* path) {
      if (gathered == nullptr) return bytes / element_bytes;
      int64_t wrong = 0;
      for (int source = 0; source < ranks; ++source) {
        wrong += count_wrong_block(
            dtype, ranks, 1, source, 0, sweep.rank,
            static_cast<const unsigned char*>(gathered) + source * block_bytes, block, path);
      }
      return wrong;
    };
    void* const in = input.data();
    void* const out = output.data();

    const std::string name = "herd-bench/allgather/" + std::to_string(bytes);
    int64_t wrong = run.measure(
        "herd",
        [&] {
          herd::allgather(name, TensorView{in, dtype, {block}}, &result);
        },
        [&] {
          return wrong_in(result_data(result, dtype, block * ranks, sweep.rank, "herd"), "herd");
        });
    const std::vector<int64_t> bytes_per_rank(ranks, block_bytes);
    wrong += run.measure(
        "ring",
        [&] {
          throw_if_failed(collectives::ring_allgatherv(in, out, bytes_per_rank, transport),
                          "ring_allgatherv");
        },
        [&] { return wrong_in(out, "ring"); });
    if (type != MPI_DATATYPE_NULL && block <= INT_MAX) {
      wrong += run.measure(
          "mpi",
          [&] {
            const int n = static_cast<int>(block);
            HERD_MPI_CHECK(MPI_Allgather(in, n, type, out, n, type, comm));
          },
          [&] { return wrong_in(out, "mpi"); });
    }
    run.measure_memcpy();
    return wrong;
  });
}

}  // namespace herd::bench
