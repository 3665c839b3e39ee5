// What the hierarchical benchmarks (herd-shm-steps-bench, herd-hier-bench)
// share: sizes from the command line, a timed call on every rank, medians
// and same-repetition ratios. Called on every rank's main thread; timed() is
// collective over its communicator.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"

namespace herd::bench {

// "64M", "512K", "1024": bytes.
inline int64_t parse_bytes(const std::string& text) {
  std::size_t end = 0;
  const int64_t value = std::stoll(text, &end);
  const std::string unit = text.substr(end);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  throw std::invalid_argument("size " + text + ": the unit is K, M or G");
}

// "1M,4M,16M": bytes each.
inline std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    sizes.push_back(parse_bytes(text.substr(from, comma - from)));
    from = comma + 1;
  }
  return sizes;
}

// Walks argv as "--flag value" pairs: --sizes sets `sizes`, --reps `reps`;
// any other flag goes to `apply` (when given), which returns false for a
// flag it does not know.
inline void parse_flags(
    int argc, char** argv, std::vector<int64_t>* sizes, int* reps,
    const std::function<bool(const std::string& flag, const std::string& value)>& apply = {}) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      *sizes = parse_sizes(value);
    } else if (flag == "--reps") {
      *reps = std::stoi(value);
    } else if (!apply || !apply(flag, value)) {
      throw std::invalid_argument("unknown option " + flag);
    }
  }
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Seconds the slowest rank took for `body`, started together.
inline double timed(MPI_Comm comm, const std::function<void()>& body) {
  MPI_Barrier(comm);
  const auto start = std::chrono::steady_clock::now();
  body();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  return seconds;
}

// "<median µs> <median of baseline[i] / times[i]>": a variant's column
// against a baseline timed in the same repetitions (> 1: faster than it).
inline std::string ratio_column(const std::vector<double>& times,
                                const std::vector<double>& baseline) {
  if (times.empty()) return fmt::format("{:>10} {:>6}", "-", "-");
  std::vector<double> ratios;
  for (std::size_t rep = 0; rep < times.size(); ++rep) ratios.push_back(baseline[rep] / times[rep]);
  return fmt::format("{:>10.1f} {:>6.2f}", median(times) * 1e6, median(ratios));
}

// `count` summed over the ranks of `comm` (collective): wrong elements.
inline int64_t sum_over_ranks(MPI_Comm comm, int64_t count) {
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT64_T, MPI_SUM, comm);
  return count;
}

inline void require_ok(const Status& status, const char* what) {
  if (!status.is_ok()) throw std::runtime_error(std::string(what) + ": " + status.message());
}

}  // namespace herd::bench
