#include "benchmarks/herd_bench/broadcast_bench.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/bench_sweep.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "collectives/broadcast.h"
#include "collectives/mpi/mpi_transport.h"

namespace herd::bench {
namespace {

// The paths, in the order of their rows, all in place on one buffer of
// `count` elements, which holds the root's input on the root before each path
// and is poisoned on the other ranks:
//   herd:   herd::broadcast, the whole runtime (enqueue, negotiate, then
//           collectives::broadcast, which picks the tree up to 1 MiB, or on
//           two ranks, and the chain above).
//   tree:   collectives::binomial_broadcast alone over an MpiTransport on its
//           own communicator, at every size.
//   chain:  collectives::chain_broadcast alone, with its default segment, at
//           every size: with the tree row, where herd's threshold should lie.
//   mpi:    MPI_Bcast on the same buffer.
//   memcpy: rank 0 alone copies as many bytes (bench_sweep.h).
// The root's input is block_value(..., source root, block 0, i), which every
// rank's buffer must hold afterwards, the root's included.
//
// Bus bandwidth of a broadcast (nccl-tests): busbw = algbw. All the data has
// to leave the root, through its one link, whatever the algorithm.

}  // namespace

CLI::App* add_broadcast_command(CLI::App& app, BroadcastBenchOptions& options) {
  CLI::App* command = app.add_subcommand("broadcast", "Broadcast bandwidth sweep");
  add_sweep_options(*command, options);
  command->add_option("-r,--root", options.root, "Rank whose buffer is broadcast")
      ->check(CLI::Range(0, INT_MAX));
  return command;
}

int64_t run_broadcast_bench(const BroadcastBenchOptions& options, MPI_Comm comm) {
  const Sweep sweep = open_sweep(options, comm);
  const int ranks = sweep.ranks;
  const int root = options.root;
  if (root >= ranks) {
    throw std::runtime_error("herd-bench: --root " + std::to_string(root) + " is not a rank of " +
                             std::to_string(ranks));
  }
  const DataType dtype = options.dtype;

  // The algorithms' own communicator, so that their tags never meet herd's
  // or ours. Declared before the transport, so that it outlives it.
  DupComm algorithm_comm(comm);
  collectives::MpiTransport transport(algorithm_comm.get());
  const int64_t element_bytes = static_cast<int64_t>(element_size(dtype));
  const MPI_Datatype type = mpi_type(dtype);

  print_preamble(
      sweep, "broadcast", "root " + std::to_string(root), "algbw",
      {"herd runs the tree up to " +
       format_bytes(collectives::kDefaultBroadcastChainThresholdBytes) +
       " (at any size on 2 ranks) and the chain above; the tree and chain rows are always theirs"});
  return for_each_size(sweep, [&](int64_t size) {
    // At least one element; a size that is not a multiple of the element is rounded down.
    const int64_t count = std::max<int64_t>(1, size / element_bytes);
    const int64_t bytes = count * element_bytes;
    std::vector<unsigned char> input(sweep.rank == root ? bytes : 0), buffer(bytes);
    if (sweep.rank == root) fill_block(dtype, ranks, 1, root, 0, input.data(), count);
    const SizeRun run(sweep, {bytes, count, "", broadcast_bus_factor(sweep.ranks)}, [&] {
      poison(buffer);
      if (sweep.rank == root) std::memcpy(buffer.data(), input.data(), bytes);
    });
    const auto buffer_wrong = [&](const char* path) {
      return [&, path] {
        return count_wrong_block(dtype, ranks, 1, root, 0, sweep.rank, buffer.data(), count, path);
      };
    };
    void* const buf = buffer.data();

    const std::string name = "herd-bench/broadcast/" + std::to_string(bytes);
    int64_t wrong = run.measure(
        "herd",
        [&] {
          herd::broadcast(name, TensorView{buf, dtype, {count}}, root);
        },
        buffer_wrong("herd"));
    wrong += run.measure(
        "tree",
        [&] {
          throw_if_failed(collectives::binomial_broadcast(buf, bytes, root, transport),
                          "binomial_broadcast");
        },
        buffer_wrong("tree"));
    wrong += run.measure(
        "chain",
        [&] {
          throw_if_failed(collectives::chain_broadcast(buf, bytes, root, transport),
                          "chain_broadcast");
        },
        buffer_wrong("chain"));
    if (type != MPI_DATATYPE_NULL && count <= INT_MAX) {
      wrong += run.measure(
          "mpi", [&] { HERD_MPI_CHECK(MPI_Bcast(buf, static_cast<int>(count), type, root, comm)); },
          buffer_wrong("mpi"));
    }
    run.measure_memcpy();
    return wrong;
  });
}

}  // namespace herd::bench
