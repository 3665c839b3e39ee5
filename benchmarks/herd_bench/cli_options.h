// herd-bench's command-line pieces shared by its subcommands (CLI11): byte
// sizes with K/M/G suffixes, dtype and op names, and the sweep options every
// bandwidth table takes (-b -e -f -n -w --csv -q).
//
// Called by main() on every rank while it builds the command line; no state.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "herd/train/progress.h"
#include "herd/types.h"

namespace herd::bench {

// The options of a size sweep, shared by every collective's table.
struct SweepOptions {
  int64_t min_bytes = 4 << 10;   // -b: first size
  int64_t max_bytes = 64 << 20;  // -e: last size (inclusive)
  int64_t step_factor = 4;       // -f: each size is the previous one times this
  DataType dtype = DataType::kFloat32;
  int iterations = 20;  // -n: timed iterations per path and size
  int warmup = 5;       // -w: untimed iterations before them
  bool csv = false;     // CSV on stdout instead of the aligned table
  // --progress (-q: never): the size lines on stderr, rank 0.
  ProgressMode progress = ProgressMode::kAuto;
};

// Where a sweep's buffers live: host memory, or the memory of a CUDA device
// (gpu_bench.h). Only allreduce takes --device so far.
enum class BenchDevice { kCpu, kCuda };

// --device: "cpu" (the default) or "cuda", case-insensitively.
void add_device_option(CLI::App& command, BenchDevice& device);

// A size option: "4K", "64M", ... (table.h's parse_bytes), stored in bytes.
void add_size_option(CLI::App& command, const std::string& flags, int64_t& bytes,
                     const std::string& help);

// -d/--datatype: one of herd's dtype names, case-insensitively.
void add_dtype_option(CLI::App& command, DataType& dtype);

// -o/--op: one of herd's op names, or the aliases "avg" and "prod".
void add_op_option(CLI::App& command, ReduceOp& op);

// -b -e -f -d -n -w --csv -q into `options`.
void add_sweep_options(CLI::App& command, SweepOptions& options);

// --progress auto|always|never and -q/--quiet (--progress never): rank 0's
// progress on stderr (herd/train/progress.h).
void add_progress_options(CLI::App& command, ProgressMode& mode);

// Throws CLI::ValidationError when --maxbytes is below --minbytes.
void validate_sweep_options(const SweepOptions& options);

}  // namespace herd::bench
