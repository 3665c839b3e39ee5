// The output of herd-bench's step benchmark: "#" notes that say what was run,
// then one row per path with its step time, bandwidths, its ratio to the
// best raw baseline and to the memory-traffic floor, as aligned text or CSV,
// then a "#" line with herd's ratios.
//
// Called by the benchmark's main thread on rank 0 only, once all paths have
// run; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/herd_bench/step_ratios.h"

namespace herd::bench {

// What one run of the benchmark reduced, for the notes and the CSV columns.
struct StepTableInfo {
  std::string model;
  std::string device = "cpu";  // where the gradients live: "cpu", "cuda"
  // The raw library the baseline rows call ("mpi", "nccl"): the column
  // over_<baseline> and the notes name it.
  std::string baseline = "mpi";
  int ranks = 1;
  int tensors = 0;
  int64_t elements = 0;  // over all gradients
  int64_t bytes = 0;     // the same in bytes (float32)
  double backward_ms = 0;
  int iterations = 0;
  int warmup = 0;
  // HERD_FUSION_THRESHOLD as herd read it for the herd row; empty when unset
  // (the runtime's default).
  std::optional<std::string> fusion_threshold;
};

// Prints the notes and the table to stdout (the notes to stderr with `csv`).
// speedup = the best baseline's median / the row's median, over_<baseline> =
// the row's median - the best baseline's median, where the best baseline is
// the baseline row with the smallest median, and /floor = the row's median /
// the floor row's median (step_ratios.h; "-", or empty in CSV, where a row is
// missing). A last "#" line names the best baseline row and gives the herd
// and herd-inplace rows' speedup and /floor.
void print_step_table(const StepTableInfo& info, const std::vector<StepPathResult>& results,
                      bool csv);

}  // namespace herd::bench
