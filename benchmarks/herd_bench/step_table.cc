#include "benchmarks/herd_bench/step_table.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "benchmarks/herd_bench/table.h"

namespace herd::bench {
namespace {

std::string format_number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

void print_notes(const StepTableInfo& info, const std::vector<StepPathResult>& results,
                 const Table& notes) {
  std::string baselines;
  for (const StepPathResult& r : results) {
    if (!r.baseline) continue;
    baselines += (baselines.empty() ? "" : ", ") + r.path;
  }
  notes.print_note("herd-bench step: " + info.model + ", " + std::to_string(info.tensors) +
                   " gradients, " + std::to_string(info.elements) + " float32 (" +
                   format_bytes(info.bytes) + ") per step, " + std::to_string(info.ranks) +
                   " ranks, buffers on " + info.device + ", " + std::to_string(info.iterations) +
                   " timed steps after " + std::to_string(info.warmup) + " warmup");
  notes.print_note(
      "each step: every gradient in backward order, each after a sleep for its "
      "share (by size) of " +
      format_number("%g", info.backward_ms) + " ms of backward compute (--backward-ms)");
  notes.print_note(
      "time: per step the slowest rank; median and mean over the steps; algbw = "
      "gradient bytes / median; busbw = algbw * 2(p-1)/p");
  const std::string& base = info.baseline;
  notes.print_note("op: sum (no division, so the check is exact); speedup = best " + base +
                   " median / median; over_" + base + " = median - best " + base +
                   " median (best of " + baselines + ")");
  notes.print_note("herd: fusion threshold " +
                   (info.fusion_threshold ? "HERD_FUSION_THRESHOLD=" + *info.fusion_threshold
                                          : std::string("at the runtime's default")) +
                   "; herd-nofusion: herd restarted with HERD_FUSION_THRESHOLD=0");
}

}  // namespace

void print_step_table(const StepTableInfo& info, const std::vector<StepPathResult>& results,
                      bool csv) {
  const Table notes(stdout, csv);
  print_notes(info, results, notes);
  double best_mpi = std::numeric_limits<double>::infinity();
  for (const StepPathResult& r : results) {
    if (r.baseline) best_mpi = std::min(best_mpi, r.stats.median_seconds);
  }
  const std::string over = "over_" + info.baseline;
  if (csv) {
    std::printf(
        "model,ranks,tensors,bytes,backward_ms,path,median_ms,mean_ms,algbw_gbps,busbw_gbps,"
        "speedup,%s_ms,wrong\n",
        over.c_str());
  } else {
    std::printf("%-24s %10s %10s %9s %9s %8s %10s %8s\n", "path", "median", "mean", "algbw",
                "busbw", "speedup", over.c_str(), "#wrong");
    std::printf("%-24s %10s %10s %9s %9s %8s %10s %8s\n", "", "(ms)", "(ms)", "(GB/s)", "(GB/s)",
                "(x)", "(ms)", "");
  }
  for (const StepPathResult& r : results) {
    const double median = r.stats.median_seconds;
    const double algbw = static_cast<double>(info.bytes) / median / 1e9;
    const double busbw = algbw * allreduce_bus_factor(info.ranks);
    const double speedup = best_mpi / median;
    const double over_ms = (median - best_mpi) * 1e3;
    if (csv) {
      std::printf("%s,%d,%d,%lld,%g,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%lld\n", info.model.c_str(),
                  info.ranks, info.tensors, static_cast<long long>(info.bytes), info.backward_ms,
                  r.path.c_str(), median * 1e3, r.stats.mean_seconds * 1e3, algbw, busbw, speedup,
                  over_ms, static_cast<long long>(r.wrong));
    } else {
      std::printf("%-24s %10.3f %10.3f %9.3f %9.3f %8.2f %+10.3f %8lld\n", r.path.c_str(),
                  median * 1e3, r.stats.mean_seconds * 1e3, algbw, busbw, speedup, over_ms,
                  static_cast<long long>(r.wrong));
    }
  }
  std::fflush(stdout);
}

}  // namespace herd::bench
