// The machinery every bandwidth sweep of herd-bench shares (allreduce,
// allgather, broadcast, reducescatter, alltoall): the sizes of a sweep, the
// notes above its table, and, for one size, the timing, the check summed over
// ranks and the row of each path, and the memcpy floor. Each collective's
// *_bench.cc fills its buffers and says what each path runs and how its
// output is checked.
//
// Called by herd-bench's main thread on every rank, after herd::init();
// open_sweep, for_each_size and every SizeRun::measure* are collective over
// the sweep's communicator. Rank 0 prints.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/cli_options.h"
#include "benchmarks/herd_bench/table.h"
#include "common/status.h"
#include "herd/tensor.h"

namespace herd::bench {

// What every size of one sweep shares. `options` must outlive it.
struct Sweep {
  const SweepOptions& options;
  MPI_Comm comm;  // the benchmark's own: barriers, the check's sum, the mpi path
  int rank;
  int ranks;
  Table table;
};

// Reads comm's rank and size. Throws std::runtime_error unless comm holds as
// many ranks as herd's world (it must hold the same ones, in the same order)
// and herd-bench supports options.dtype.
Sweep open_sweep(const SweepOptions& options, MPI_Comm comm);

// Rank 0 prints the notes above the table, then its header:
//   herd-bench <collective>: <p> ranks, <dtype>[, <qualifier>], <n> timed ...
//   time: ...; algbw = size / time; busbw = <busbw_formula>
//   each of `notes`
//   mpi: skipped, where MPI has no type for the dtype
//   memcpy: every rank copies its buffer at once ...
void print_preamble(const Sweep& sweep, const std::string& collective, const std::string& qualifier,
                    const std::string& busbw_formula, const std::vector<std::string>& notes);

// The first two of those lines alone (rank 0), for a sweep whose other notes
// and ceiling differ (gpu_bench.h); the caller prints the header after its notes.
void print_title(const Sweep& sweep, const std::string& collective, const std::string& qualifier,
                 const std::string& busbw_formula);

// Calls run_size(size) for each size from -b to -e (times -f each step),
// printing "[3/12] 1 MiB" on stderr first (rank 0, unless -q) and flushing
// the table after; returns the sum of what run_size returned.
int64_t for_each_size(const Sweep& sweep, const std::function<int64_t(int64_t size)>& run_size);

// Sets every byte of `buffer` (all bits: NaN for a floating type, -1 or the
// largest value for an integer one), so that a path that writes nothing
// cannot pass on the previous path's result.
void poison(std::vector<unsigned char>& buffer);

// Throws std::runtime_error("<call>: <message>") if `status` failed.
void throw_if_failed(const Status& status, const char* call);

// The data of a Tensor that herd filled, if it holds `count` elements of
// `dtype`; otherwise prints what it holds to stderr and returns nullptr, which
// the caller counts as `count` wrong elements.
const void* result_data(const Tensor& result, DataType dtype, int64_t count, int rank,
                        const char* path);

// The columns that every path's row of one size shares.
struct RowColumns {
  int64_t bytes = 0;        // size: nccl-tests' S, which algbw divides by the time
  int64_t count = 0;        // count: the count a call is given (see docs/benchmarks.md)
  std::string redop;        // empty for a collective that does not reduce
  double bus_factor = 1.0;  // busbw = algbw * bus_factor
};

// One size of a sweep.
class SizeRun {
 public:
  // reset_output runs before each path, so that no path is checked on what
  // an earlier one left (typically poison() on the output).
  SizeRun(const Sweep& sweep, RowColumns columns, std::function<void()> reset_output)
      : sweep_(sweep), columns_(std::move(columns)), reset_output_(std::move(reset_output)) {}

  // Resets the output, times `once` (time_path: -w warmup calls, then -n
  // timed ones; the slowest rank's mean), then sums local_wrong() — this
  // rank's wrong elements after the last call — over the ranks, prints the
  // row on rank 0 and returns the sum on every rank.
  template <typename Fn, typename Check>
  int64_t measure(const char* path, Fn&& once, Check&& local_wrong) const {
    reset_output_();
    const double seconds =
        time_path(once, sweep_.options.warmup, sweep_.options.iterations, sweep_.comm);
    return finish_row(path, seconds, local_wrong());
  }

  // The same for a path that reduces in place, in one buffer: `zero` sets
  // every element of it to 0 before the timing, so that -w + -n calls leave
  // it at 0 (a sum, product or average of zeros neither overflows nor goes
  // denormal, and the values stay ordinary for every path alike); then,
  // untimed, `fill` puts this rank's input back, one more call of `once`
  // reduces it, and local_wrong() checks that call's result exactly.
  template <typename Fn, typename Check>
  int64_t measure_in_place(const char* path, Fn&& once, const std::function<void()>& zero,
                           const std::function<void()>& fill, Check&& local_wrong) const {
    zero();
    const double seconds =
        time_path(once, sweep_.options.warmup, sweep_.options.iterations, sweep_.comm);
    fill();
    once();
    return finish_row(path, seconds, local_wrong());
  }

  // The memory-traffic floor: every rank copies `bytes` bytes between two
  // buffers of its own, all at once, timed as a path is (time_path: the
  // slowest rank's mean). The ranks of a collective share the memory bus, so
  // this is the time no implementation that reads its input and writes its
  // output once can beat on this machine. The row has no reduction, bus or
  // check.
  void measure_memcpy() const;

  // A ceiling that rank 0 alone measures (gpu_bench.h's device copy): rank 0
  // calls rank0_seconds, which runs -w untimed and -n timed iterations and
  // returns the mean seconds of one, while the other ranks wait at a
  // barrier; then rank 0 prints the row. No reduction, bus or check.
  void measure_ceiling(const char* path, const std::function<double()>& rank0_seconds) const;

 private:
  int64_t finish_row(const char* path, double seconds, int64_t local_wrong) const;
  Row base_row(const char* path, double seconds) const;

  const Sweep& sweep_;
  RowColumns columns_;
  std::function<void()> reset_output_;
};

}  // namespace herd::bench
