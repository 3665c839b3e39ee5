#include "benchmarks/herd_bench/reducescatter_bench.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/bench_sweep.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/reducescatter.h"
#include "ops/reduce.h"

namespace herd::bench {

// The paths, in the order of their rows, each from p blocks of `block`
// elements (input) to this rank's block of the reduction (output):
//   herd:   herd::reducescatter, the whole runtime (enqueue, negotiate, then
//           the ring), into a herd::Tensor that herd allocates on every call.
//   ring:   collectives::ring_reducescatter alone over an MpiTransport on its
//           own communicator. It reduces in its input buffer, so each call
//           first copies input into a scratch buffer (timed), as herd does.
//   mpi:    MPI_Reduce_scatter_block(input, output) on the same buffers.
//   memcpy: rank 0 alone copies as many bytes (bench_sweep.h).
// Every rank's input is allreduce's (fill_input), and rank r's result must be
// elements r*block .. (r+1)*block-1 of allreduce's closed form. An average is
// a sum followed by a division by p: herd divides itself, ring and mpi call
// ops::divide on their block after the sum, timed.

CLI::App* add_reducescatter_command(CLI::App& app, ReducescatterBenchOptions& options) {
  CLI::App* command = app.add_subcommand("reducescatter", "Reducescatter bandwidth sweep");
  add_sweep_options(*command, options);
  add_op_option(*command, options.op);
  return command;
}

int64_t run_reducescatter_bench(const ReducescatterBenchOptions& options, MPI_Comm comm) {
  const Sweep sweep = open_sweep(options, comm);
  const int ranks = sweep.ranks;
  const DataType dtype = options.dtype;
  const ReduceOp op = options.op;

  // The ring's own communicator, so that its tags never meet herd's or ours.
  // Declared before the transport, so that it outlives it.
  DupComm ring_comm(comm);
  collectives::MpiTransport transport(ring_comm.get());
  const ops::ReduceFn reduce = ops::make_reduce_fn(dtype, op);  // an average sums
  const int64_t element_bytes = static_cast<int64_t>(element_size(dtype));
  const MPI_Datatype type = mpi_type(dtype);

  std::vector<std::string> notes{
      "size: the reduced buffer, p blocks; count: the elements of one block"};
  if (op == ReduceOp::kAverage) {
    notes.push_back("avg: ring and mpi sum, then divide by p on the host (timed), as herd does");
  }
  print_preamble(sweep, "reducescatter", to_string(op), "algbw * (p-1)/p", notes);
  return for_each_size(sweep, [&](int64_t size) {
    // One block per rank of at least one element; the size is rounded down.
    const int64_t block = std::max<int64_t>(1, size / element_bytes / ranks);
    const int64_t count = block * ranks;
    const int64_t bytes = count * element_bytes;
    std::vector<unsigned char> input(bytes), scratch(bytes), output(block * element_bytes);
    fill_input(dtype, op, sweep.rank, input.data(), count);
    Tensor result;
    const SizeRun run(sweep, {bytes, block, to_string(op), block_exchange_bus_factor(ranks)}, [&] {
      poison(output);
      result = Tensor();
    });
    // This rank's block (null: wrong shape, all wrong) against the closed form.
    const auto wrong_in = [&](const void* reduced, const char* path) {
      if (reduced == nullptr) return block;
      return count_wrong_from(dtype, op, ranks, sweep.rank, reduced, sweep.rank * block, block,
                              path);
    };
    void* const in = input.data();
    void* const out = output.data();
    const auto divide_if_average = [&] {
      if (op == ReduceOp::kAverage) ops::divide(out, block, dtype, ranks);
    };

    const std::string name = "herd-bench/reducescatter/" + std::to_string(bytes);
    int64_t wrong = run.measure(
        "herd",
        [&] {
          herd::reducescatter(name, TensorView{in, dtype, {count}}, &result, op);
        },
        [&] { return wrong_in(result_data(result, dtype, block, sweep.rank, "herd"), "herd"); });
    const std::vector<int64_t> counts_per_rank(ranks, block);
    wrong += run.measure(
        "ring",
        [&] {
          std::memcpy(scratch.data(), in, bytes);
          throw_if_failed(collectives::ring_reducescatter(scratch.data(), out, counts_per_rank,
                                                          element_bytes, reduce, transport),
                          "ring_reducescatter");
          divide_if_average();
        },
        [&] { return wrong_in(out, "ring"); });
    if (type != MPI_DATATYPE_NULL && block <= INT_MAX) {
      wrong += run.measure(
          "mpi",
          [&] {
            HERD_MPI_CHECK(
                MPI_Reduce_scatter_block(in, out, static_cast<int>(block), type, mpi_op(op), comm));
            divide_if_average();
          },
          [&] { return wrong_in(out, "mpi"); });
    }
    run.measure_memcpy();
    return wrong;
  });
}

}  // namespace herd::bench
