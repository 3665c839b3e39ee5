#include "benchmarks/herd_bench/allreduce_bench.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/bench_sweep.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "benchmarks/herd_bench/gpu_bench.h"
#include "benchmarks/herd_bench/table.h"
#include "collectives/allreduce.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/mpi/node_shm.h"
#include "ops/reduce.h"

namespace herd::bench {
namespace {

// The paths, in the order of their rows:
//   herd:         herd::allreduce, the whole runtime (enqueue, negotiate,
//                 fuse, then shared memory, ring or recursive doubling),
//                 input -> output.
//   herd-inplace: the same with input == output, as an optimizer reduces
//                 its gradients.
//   ring:         collectives::ring_allreduce alone over an MpiTransport,
//                 input -> output, at every size.
//   shm:          the shared-memory allreduce alone (collectives/shm), input
//                 -> output, at every size, when all ranks are on one machine.
//   mpi:          MPI_Allreduce(input, output) on the same buffers.
//   mpi-inplace:  MPI_Allreduce(MPI_IN_PLACE, buffer), on herd-inplace's
//                 buffer. MPI libraries often take a faster route in place
//                 (no copy of the input first), so herd is compared with the
//                 faster of the two mpi rows.
//   memcpy:       every rank copies as many bytes at once: the memory-traffic
//                 floor (bench_sweep.h).
// The in-place rows time calls on a buffer of zeros and check one more call
// on the input (SizeRun::measure_in_place), herd and MPI alike.
// An average is a sum followed by a division by the number of ranks; herd does
// the division itself, ring and mpi call ops::divide after the sum, timed.

// The notes above the table that only allreduce has.
std::vector<std::string> allreduce_notes(const AllreduceBenchOptions& options, int ranks) {
  std::vector<std::string> notes{
      "herd runs recursive doubling up to HERD_SMALL_ALLREDUCE_BYTES (by default " +
      format_bytes(collectives::small_allreduce_threshold(ranks)) + " at " + std::to_string(ranks) +
      " ranks) and the ring above, or the shared-memory allreduce when HERD_SHM_ALLREDUCE_BYTES "
      "allows; the ring row is always the ring, the shm row always shared memory"};
  notes.push_back(
      "herd-inplace and mpi-inplace reduce in one buffer (input == output, MPI_IN_PLACE), timed "
      "on zeros, their result checked on one more call with the input");
  if (options.op == ReduceOp::kAverage) {
    notes.push_back(
        "avg: ring, shm and the mpi rows sum, then divide by p on the host (timed), as herd does");
  }
  return notes;
}

}  // namespace

CLI::App* add_allreduce_command(CLI::App& app, AllreduceBenchOptions& options) {
  CLI::App* command = app.add_subcommand("allreduce", "Allreduce bandwidth sweep");
  add_sweep_options(*command, options);
  add_op_option(*command, options.op);
  add_device_option(*command, options.device);
  return command;
}

int64_t run_allreduce_bench(const AllreduceBenchOptions& options, MPI_Comm comm) {
  if (options.device == BenchDevice::kCuda) return run_gpu_allreduce_bench(options, comm);
  const Sweep sweep = open_sweep(options, comm);
  const int ranks = sweep.ranks;

  // The ring's own communicator, so that its tags never meet herd's or ours.
  // Declared before the transport, so that it outlives it.
  DupComm ring_comm(comm);
  collectives::MpiTransport transport(ring_comm.get());
  std::string no_shm;
  const std::unique_ptr<collectives::NodeShm> shm =
      collectives::make_node_shm(comm, collectives::NodeShmOptions{}, &no_shm);
  const ops::ReduceFn reduce = ops::make_reduce_fn(options.dtype, options.op);
  const std::size_t element_bytes = element_size(options.dtype);
  const MPI_Datatype type = mpi_type(options.dtype);

  print_preamble(sweep, "allreduce", to_string(options.op), "algbw * 2(p-1)/p",
                 allreduce_notes(options, ranks));
  return for_each_size(sweep, [&](int64_t size) {
    // At least one element; a size that is not a multiple of the element is rounded down.
    const int64_t count = std::max<int64_t>(1, size / static_cast<int64_t>(element_bytes));
    const int64_t bytes = count * static_cast<int64_t>(element_bytes);
    std::vector<unsigned char> input(bytes), output(bytes), in_place(bytes);
    fill_input(options.dtype, options.op, sweep.rank, input.data(), count);
    const SizeRun run(sweep, {bytes, count, to_string(options.op), allreduce_bus_factor(ranks)},
                      [&] { poison(output); });
    const auto wrong_in = [&](const std::vector<unsigned char>& result, const char* path) {
      return [&, path] {
        return count_wrong(options.dtype, options.op, ranks, sweep.rank, result.data(), count,
                           path);
      };
    };
    const auto output_wrong = [&](const char* path) { return wrong_in(output, path); };
    void* const in = input.data();
    void* const out = output.data();
    void* const inout = in_place.data();
    const auto divide_if_average = [&](void* result) {
      if (options.op == ReduceOp::kAverage) ops::divide(result, count, options.dtype, ranks);
    };
    // Zeros are 0 in every dtype; the input is copied back for the check.
    const auto zero_in_place = [&] { std::fill(in_place.begin(), in_place.end(), 0); };
    const auto fill_in_place = [&] { std::copy(input.begin(), input.end(), in_place.begin()); };

    const std::string name = "herd-bench/allreduce/" + std::to_string(bytes);
    int64_t wrong = run.measure(
        "herd",
        [&] {
          herd::allreduce(name, TensorView{in, options.dtype, {count}},
                          TensorView{out, options.dtype, {count}}, options.op);
        },
        output_wrong("herd"));
    const std::string in_place_name = "herd-bench/allreduce-inplace/" + std::to_string(bytes);
    wrong += run.measure_in_place(
        "herd-inplace",
        [&] {
          const TensorView buffer{inout, options.dtype, {count}};
          herd::allreduce(in_place_name, buffer, buffer, options.op);
        },
        zero_in_place, fill_in_place, wrong_in(in_place, "herd-inplace"));
    wrong += run.measure(
        "ring",
        [&] {
          const Status status = collectives::ring_allreduce(
              in, out, count, element_bytes, reduce, transport, collectives::kDefaultSegmentBytes);
          if (!status) throw std::runtime_error("ring_allreduce: " + status.message());
          divide_if_average(out);
        },
        output_wrong("ring"));
    if (shm) {
      wrong += run.measure(
          "shm",
          [&] {
            const Status status = shm->group().allreduce(in, out, count, element_bytes, reduce);
            if (!status) throw std::runtime_error("shm allreduce: " + status.message());
            divide_if_average(out);
          },
          output_wrong("shm"));
    }
    if (type != MPI_DATATYPE_NULL && count <= INT_MAX) {
      wrong += run.measure(
          "mpi",
          [&] {
            HERD_MPI_CHECK(
                MPI_Allreduce(in, out, static_cast<int>(count), type, mpi_op(options.op), comm));
            divide_if_average(out);
          },
          output_wrong("mpi"));
      wrong += run.measure_in_place(
          "mpi-inplace",
          [&] {
            HERD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, inout, static_cast<int>(count), type,
                                         mpi_op(options.op), comm));
            divide_if_average(inout);
          },
          zero_in_place, fill_in_place, wrong_in(in_place, "mpi-inplace"));
    }
    run.measure_memcpy();
    return wrong;
  });
}

}  // namespace herd::bench
