#include "benchmarks/herd_bench/allreduce_bench.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "benchmarks/herd_bench/table.h"
#include "collectives/allreduce.h"
#include "collectives/mpi/mpi_transport.h"
#include "ops/reduce.h"

namespace herd::bench {
namespace {

// The paths, in the order of their rows:
//   herd:   herd::allreduce, the whole runtime (enqueue, negotiate, fuse,
//           then ring or recursive doubling), input -> output.
//   ring:   collectives::ring_allreduce alone over an MpiTransport: copy input
//           to output, then reduce output in place (the same work as an
//           out-of-place allreduce).
//   mpi:    MPI_Allreduce(input, output) on the same buffers.
//   memcpy: rank 0 alone copies input to output: a ceiling for one pass over
//           the buffer on this machine.
// An average is a sum followed by a division by the number of ranks; herd does
// the division itself, ring and mpi call ops::divide after the sum, timed.

// Bus bandwidth of an allreduce (nccl-tests' definition): busbw = algbw *
// 2(p-1)/p. A ring allreduce on p ranks sends, and receives, 2(p-1)/p times
// the buffer per rank (p-1 steps of reduce-scatter and p-1 of allgather, each
// moving 1/p of it), so busbw is comparable with a link's bandwidth at any p.
double allreduce_bus_factor(int ranks) { return 2.0 * (ranks - 1) / ranks; }

// One size of the sweep: the buffers and what every path needs to fill a row.
struct SizeRun {
  const AllreduceBenchOptions& options;
  MPI_Comm comm;
  int rank;
  int ranks;
  int64_t count;
  int64_t bytes;
  std::vector<unsigned char> input;
  std::vector<unsigned char> output;

  // Poisons output (all bits set: NaN or -1), so that a path that writes
  // nothing cannot pass on the previous path's result.
  void poison() { std::fill(output.begin(), output.end(), static_cast<unsigned char>(0xFF)); }

  // Times `once`, checks output on every rank and prints the row on rank 0.
  // Returns the wrong elements over all ranks.
  template <typename Fn>
  int64_t measure(const char* path, Fn&& once, const Table& table) {
    poison();
    const double seconds = time_path(once, options.warmup, options.iterations, comm);
    const int64_t local_wrong =
        count_wrong(options.dtype, options.op, ranks, rank, output.data(), count, path);
    int64_t wrong = 0;
    check_mpi(MPI_Allreduce(&local_wrong, &wrong, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
    if (rank == 0) {
      Row row = base_row(path, seconds);
      row.busbw_gbps = row.algbw_gbps * allreduce_bus_factor(ranks);
      row.wrong = wrong;
      table.print_row(row);
    }
    return wrong;
  }

  Row base_row(const char* path, double seconds) const {
    Row row;
    row.bytes = bytes;
    row.count = count;
    row.type = to_string(options.dtype);
    row.path = path;
    row.time_us = seconds * 1e6;
    row.algbw_gbps = static_cast<double>(bytes) / seconds / 1e9;
    if (std::string(path) != "memcpy") row.redop = to_string(options.op);
    return row;
  }

  // Rank 0 alone copies input to output; the other ranks wait at the barrier.
  void measure_memcpy(const Table& table) {
    if (rank == 0) {
      for (int i = 0; i < options.warmup; ++i) std::memcpy(output.data(), input.data(), bytes);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < options.iterations; ++i) {
        std::memcpy(output.data(), input.data(), bytes);
      }
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      table.print_row(base_row("memcpy", elapsed.count() / options.iterations));
    }
    check_mpi(MPI_Barrier(comm), "MPI_Barrier");
  }
};

void print_notes(const AllreduceBenchOptions& options, int ranks, const Table& table) {
  table.print_note("herd-bench allreduce: " + std::to_string(ranks) + " ranks, " +
                   to_string(options.dtype) + ", " + to_string(options.op) + ", " +
                   std::to_string(options.iterations) + " timed iterations after " +
                   std::to_string(options.warmup) + " warmup");
  table.print_note("time: the slowest rank's mean per iteration; algbw = size / time; busbw = " +
                   std::string("algbw * 2(p-1)/p"));
  table.print_note("herd runs recursive doubling up to " +
                   format_bytes(collectives::kDefaultSmallMessageThresholdBytes) +
                   " and the ring above; the ring row is always the ring");
  if (mpi_type(options.dtype) == MPI_DATATYPE_NULL) {
    table.print_note("mpi: skipped, MPI has no " + to_string(options.dtype) + " type");
  }
  if (options.op == ReduceOp::kAverage) {
    table.print_note("avg: ring and mpi sum, then divide by p on the host (timed), as herd does");
  }
  table.print_note("memcpy: one rank copies the same bytes (no reduction, no check)");
}

}  // namespace

CLI::App* add_allreduce_command(CLI::App& app, AllreduceBenchOptions& options) {
  CLI::App* command = app.add_subcommand("allreduce", "Allreduce bandwidth sweep");
  add_sweep_options(*command, options);
  add_op_option(*command, options.op);
  return command;
}

int64_t run_allreduce_bench(const AllreduceBenchOptions& options, MPI_Comm comm) {
  int rank = 0, ranks = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &ranks), "MPI_Comm_size");
  if (ranks != herd::size()) throw std::runtime_error("herd-bench: comm is not herd's world");
  if (!is_supported(options.dtype)) {
    throw std::runtime_error("herd-bench: unsupported dtype " + to_string(options.dtype));
  }

  // The ring's own communicator, so that its tags never meet herd's or ours.
  // Declared before the transport, so that it outlives it.
  DupComm ring_comm(comm);
  collectives::MpiTransport transport(ring_comm.get());
  const ops::ReduceFn reduce = ops::make_reduce_fn(options.dtype, options.op);
  const std::size_t element_bytes = element_size(options.dtype);
  const MPI_Datatype type = mpi_type(options.dtype);

  std::vector<int64_t> sizes;
  for (int64_t b = options.min_bytes; b <= options.max_bytes; b *= options.step_factor) {
    sizes.push_back(b);
  }

  const Table table(stdout, options.csv);
  if (rank == 0) {
    print_notes(options, ranks, table);
    table.print_header();
  }
  int64_t total_wrong = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    // At least one element; a size that is not a multiple of the element is rounded down.
    const int64_t count = std::max<int64_t>(1, sizes[s] / static_cast<int64_t>(element_bytes));
    const int64_t bytes = count * static_cast<int64_t>(element_bytes);
    if (rank == 0 && !options.quiet) {
      std::fprintf(stderr, "[%zu/%zu] %s\n", s + 1, sizes.size(), format_bytes(bytes).c_str());
    }
    SizeRun run{options, comm, rank, ranks, count, bytes, {}, {}};
    run.input.resize(bytes);
    run.output.resize(bytes);
    fill_input(options.dtype, options.op, rank, run.input.data(), count);
    void* const in = run.input.data();
    void* const out = run.output.data();
    const auto divide_if_average = [&] {
      if (options.op == ReduceOp::kAverage) ops::divide(out, count, options.dtype, ranks);
    };

    const std::string name = "herd-bench/allreduce/" + std::to_string(bytes);
    total_wrong += run.measure(
        "herd",
        [&] {
          herd::allreduce(name, TensorView{in, options.dtype, {count}},
                          TensorView{out, options.dtype, {count}}, options.op);
        },
        table);
    total_wrong += run.measure(
        "ring",
        [&] {
          std::memcpy(out, in, bytes);
          const Status status =
              collectives::ring_allreduce(out, count, element_bytes, reduce, transport);
          if (!status) throw std::runtime_error("ring_allreduce: " + status.message());
          divide_if_average();
        },
        table);
    if (type != MPI_DATATYPE_NULL && count <= INT_MAX) {
      total_wrong += run.measure(
          "mpi",
          [&] {
            check_mpi(
                MPI_Allreduce(in, out, static_cast<int>(count), type, mpi_op(options.op), comm),
                "MPI_Allreduce");
            divide_if_average();
          },
          table);
    }
    run.measure_memcpy(table);
    std::fflush(stdout);
  }
  return total_wrong;
}

}  // namespace herd::bench
