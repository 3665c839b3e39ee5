#include "benchmarks/herd_bench/bench_sweep.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_values.h"

namespace herd::bench {

Sweep open_sweep(const SweepOptions& options, MPI_Comm comm) {
  int rank = 0, ranks = 1;
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HERD_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  if (ranks != herd::size()) throw std::runtime_error("herd-bench: comm is not herd's world");
  if (!is_supported(options.dtype)) {
    throw std::runtime_error("herd-bench: unsupported dtype " + to_string(options.dtype));
  }
  return Sweep{options, comm, rank, ranks, Table(stdout, options.csv)};
}

void print_preamble(const Sweep& sweep, const std::string& collective, const std::string& qualifier,
                    const std::string& busbw_formula, const std::vector<std::string>& notes) {
  if (sweep.rank != 0) return;
  const SweepOptions& options = sweep.options;
  const Table& table = sweep.table;
  print_title(sweep, collective, qualifier, busbw_formula);
  for (const std::string& note : notes) table.print_note(note);
  if (mpi_type(options.dtype) == MPI_DATATYPE_NULL) {
    table.print_note("mpi: skipped, MPI has no " + to_string(options.dtype) + " type");
  }
  table.print_note(
      "memcpy: every rank copies its own buffer of the same bytes at the same time, as the ranks "
      "share the memory bus during the collective: the memory-traffic floor (no reduction, no "
      "check)");
  table.print_header();
}

void print_title(const Sweep& sweep, const std::string& collective, const std::string& qualifier,
                 const std::string& busbw_formula) {
  if (sweep.rank != 0) return;
  const SweepOptions& options = sweep.options;
  sweep.table.print_note("herd-bench " + collective + ": " + std::to_string(sweep.ranks) +
                         " ranks, " + to_string(options.dtype) +
                         (qualifier.empty() ? "" : ", " + qualifier) + ", " +
                         std::to_string(options.iterations) + " timed iterations after " +
                         std::to_string(options.warmup) + " warmup");
  sweep.table.print_note(
      "time: the slowest rank's mean per iteration; algbw = size / time; busbw = " + busbw_formula);
}

int64_t for_each_size(const Sweep& sweep, const std::function<int64_t(int64_t size)>& run_size) {
  const SweepOptions& options = sweep.options;
  std::vector<int64_t> sizes;
  for (int64_t b = options.min_bytes; b <= options.max_bytes; b *= options.step_factor) {
    sizes.push_back(b);
  }
  int64_t wrong = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    if (sweep.rank == 0 && options.progress != ProgressMode::kNever) {
      std::fprintf(stderr, "[%zu/%zu] %s\n", s + 1, sizes.size(), format_bytes(sizes[s]).c_str());
    }
    wrong += run_size(sizes[s]);
    std::fflush(stdout);
  }
  return wrong;
}

void poison(std::vector<unsigned char>& buffer) {
  std::fill(buffer.begin(), buffer.end(), static_cast<unsigned char>(0xFF));
}

void throw_if_failed(const Status& status, const char* call) {
  if (!status) throw std::runtime_error(std::string(call) + ": " + status.message());
}

const void* result_data(const Tensor& result, DataType dtype, int64_t count, int rank,
                        const char* path) {
  if (result.dtype() == dtype && result.num_elements() == count) return result.data();
  std::fprintf(stderr, "rank %d: %s path: result is %s %s, expected %s [%lld]\n", rank, path,
               to_string(result.dtype()).c_str(), shape_to_string(result.shape()).c_str(),
               to_string(dtype).c_str(), static_cast<long long>(count));
  return nullptr;
}

void SizeRun::measure_memcpy() const {
  const std::size_t bytes = static_cast<std::size_t>(columns_.bytes);
  // Filled, so that the first timed copy does not pay for page faults.
  std::vector<unsigned char> from(bytes, 1), to(bytes, 0);
  const double seconds = time_path([&] { std::memcpy(to.data(), from.data(), bytes); },
                                   sweep_.options.warmup, sweep_.options.iterations, sweep_.comm);
  if (sweep_.rank == 0) sweep_.table.print_row(base_row("memcpy", seconds));
}

void SizeRun::measure_ceiling(const char* path,
                              const std::function<double()>& rank0_seconds) const {
  if (sweep_.rank == 0) sweep_.table.print_row(base_row(path, rank0_seconds()));
  HERD_MPI_CHECK(MPI_Barrier(sweep_.comm));
}

int64_t SizeRun::finish_row(const char* path, double seconds, int64_t local_wrong) const {
  int64_t wrong = 0;
  HERD_MPI_CHECK(MPI_Allreduce(&local_wrong, &wrong, 1, MPI_INT64_T, MPI_SUM, sweep_.comm));
  if (sweep_.rank == 0) {
    Row row = base_row(path, seconds);
    row.redop = columns_.redop;
    row.busbw_gbps = row.algbw_gbps * columns_.bus_factor;
    row.wrong = wrong;
    sweep_.table.print_row(row);
  }
  return wrong;
}

Row SizeRun::base_row(const char* path, double seconds) const {
  Row row;
  row.bytes = columns_.bytes;
  row.count = columns_.count;
  row.type = to_string(sweep_.options.dtype);
  row.path = path;
  row.time_us = seconds * 1e6;
  row.algbw_gbps = static_cast<double>(columns_.bytes) / seconds / 1e9;
  return row;
}

}  // namespace herd::bench
