#include "benchmarks/herd_bench/step_table.h"
#include "benchmarks/herd_bench/bus_factor.h"

#include <algorithm>
#include <cstdio>
#include <optional>
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
  const bool in_place = std::any_of(results.begin(), results.end(), [](const StepPathResult& r) {
    return r.path.find("inplace") != std::string::npos;
  });
  if (in_place) {
    notes.print_note(
        "*-inplace: every gradient reduced in its own buffer (input == output), which is reset "
        "from the input before each step, untimed; the other rows read the input arena and "
        "write the output arena");
  }
  if (std::any_of(results.begin(), results.end(),
                  [](const StepPathResult& r) { return r.path == "herd-shared"; })) {
    notes.print_note(
        "herd-shared: herd-inplace with the gradients in one herd::SharedBuffer, which the ranks "
        "of a machine reduce straight from");
  }
  if (floor_row(results)) {
    notes.print_note(
        "floor: every rank copies all its gradients into another arena (one memcpy), all ranks "
        "at once, as they share the memory bus: the memory-traffic floor (no reduction, no "
        "check); /floor = median / floor median");
  }
  notes.print_note("herd: fusion threshold " +
                   (info.fusion_threshold ? "HERD_FUSION_THRESHOLD=" + *info.fusion_threshold
                                          : std::string("at the runtime's default")) +
                   "; herd-nofusion: herd restarted with HERD_FUSION_THRESHOLD=0");
}

// "-" (empty in CSV) for a ratio that has no reference row.
std::string format_ratio(const char* format, const std::optional<double>& value, bool csv) {
  if (!value) return csv ? "" : "-";
  return format_number(format, *value);
}

// The closing line: the best baseline row, and how herd's rows compare with
// it and the floor, e.g. "fastest mpi row: mpi-per-tensor-inplace; herd:
// speedup 1.52x, 1.41x the floor; herd-inplace: ...".
void print_summary(const StepTableInfo& info, const std::vector<StepPathResult>& results,
                   const Table& notes) {
  const std::optional<std::size_t> best = best_baseline_row(results);
  std::string line = best ? "fastest " + info.baseline + " row: " + results[*best].path
                          : "no " + info.baseline + " row";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string& path = results[i].path;
    if (path != "herd" && path != "herd-inplace" && path != "herd-shared") continue;
    const StepRatios ratios = step_ratios(results, i);
    line += "; " + path + ": speedup " + format_ratio("%.2fx", ratios.speedup, false);
    if (ratios.over_floor) line += ", " + format_number("%.2fx", *ratios.over_floor) + " the floor";
  }
  notes.print_note(line);
}

}  // namespace

void print_step_table(const StepTableInfo& info, const std::vector<StepPathResult>& results,
                      bool csv) {
  const Table notes(stdout, csv);
  print_notes(info, results, notes);
  const std::string over = "over_" + info.baseline;
  if (csv) {
    std::printf(
        "model,ranks,tensors,bytes,backward_ms,path,median_ms,mean_ms,algbw_gbps,busbw_gbps,"
        "speedup,floor_ratio,%s_ms,wrong\n",
        over.c_str());
  } else {
    std::printf("%-24s %10s %10s %9s %9s %8s %8s %10s %8s\n", "path", "median", "mean", "algbw",
                "busbw", "speedup", "/floor", over.c_str(), "#wrong");
    std::printf("%-24s %10s %10s %9s %9s %8s %8s %10s %8s\n", "", "(ms)", "(ms)", "(GB/s)",
                "(GB/s)", "(x)", "(x)", "(ms)", "");
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    const StepPathResult& r = results[i];
    const StepRatios ratios = step_ratios(results, i);
    const double median = r.stats.median_seconds;
    const double algbw = static_cast<double>(info.bytes) / median / 1e9;
    const double busbw = algbw * allreduce_bus_factor(info.ranks);
    const std::optional<double> over_ms = ratios.over_baseline_s
                                              ? std::optional<double>(*ratios.over_baseline_s * 1e3)
                                              : std::nullopt;
    if (csv) {
      std::printf("%s,%d,%d,%lld,%g,%s,%.3f,%.3f,%.3f,%.3f,%s,%s,%s,%lld\n", info.model.c_str(),
                  info.ranks, info.tensors, static_cast<long long>(info.bytes), info.backward_ms,
                  r.path.c_str(), median * 1e3, r.stats.mean_seconds * 1e3, algbw, busbw,
                  format_ratio("%.3f", ratios.speedup, csv).c_str(),
                  format_ratio("%.3f", ratios.over_floor, csv).c_str(),
                  format_ratio("%.3f", over_ms, csv).c_str(), static_cast<long long>(r.wrong));
    } else {
      const std::string wrong = r.floor ? "-" : std::to_string(r.wrong);
      std::printf("%-24s %10.3f %10.3f %9.3f %9.3f %8s %8s %10s %8s\n", r.path.c_str(),
                  median * 1e3, r.stats.mean_seconds * 1e3, algbw, busbw,
                  format_ratio("%.2f", ratios.speedup, csv).c_str(),
                  format_ratio("%.2f", ratios.over_floor, csv).c_str(),
                  format_ratio("%+.3f", over_ms, csv).c_str(), wrong.c_str());
    }
  }
  print_summary(info, results, notes);
  std::fflush(stdout);
}

}  // namespace herd::bench
