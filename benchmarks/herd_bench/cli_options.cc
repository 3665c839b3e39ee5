#include "benchmarks/herd_bench/cli_options.h"

#include <map>
#include <stdexcept>
#include <vector>

#include "benchmarks/herd_bench/table.h"

namespace herd::bench {
namespace {

// An option that takes one of the names in `names` (herd's own, "float32",
// "sum", and aliases such as "avg"), case-insensitively.
template <typename Enum>
void add_enum_option(CLI::App& command, const std::string& flags, Enum& value,
                     const std::string& help, std::map<std::string, Enum> names) {
  std::vector<std::string> keys;
  for (const auto& entry : names) keys.push_back(entry.first);
  command
      .add_option_function<std::string>(
          flags, [&value, names](const std::string& name) { value = names.at(name); }, help)
      ->transform(CLI::IsMember(keys, CLI::ignore_case))
      ->default_str(herd::to_string(value));
}

}  // namespace

void add_size_option(CLI::App& command, const std::string& flags, int64_t& bytes,
                     const std::string& help) {
  command
      .add_option_function<std::string>(
          flags, [&bytes](const std::string& text) { bytes = parse_bytes(text); }, help)
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              return parse_bytes(text) > 0 ? std::string() : std::string("size must be positive");
            } catch (const std::exception& e) {
              return std::string(e.what());
            }
          },
          "SIZE"))
      ->type_name("SIZE")
      ->default_str(format_bytes(bytes));
}

void add_dtype_option(CLI::App& command, DataType& dtype) {
  std::map<std::string, DataType> dtypes;
  for (DataType d :
       {DataType::kUInt8, DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64,
        DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    dtypes[to_string(d)] = d;
  }
  add_enum_option(command, "-d,--datatype", dtype, "Element type", dtypes);
}

void add_op_option(CLI::App& command, ReduceOp& op) {
  std::map<std::string, ReduceOp> ops{{"avg", ReduceOp::kAverage}, {"prod", ReduceOp::kProduct}};
  for (ReduceOp o :
       {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    ops[to_string(o)] = o;
  }
  add_enum_option(command, "-o,--op", op, "Reduction", ops);
}

void add_device_option(CLI::App& command, BenchDevice& device) {
  const std::map<std::string, BenchDevice> devices{{"cpu", BenchDevice::kCpu},
                                                   {"cuda", BenchDevice::kCuda}};
  std::vector<std::string> keys;
  for (const auto& entry : devices) keys.push_back(entry.first);
  command
      .add_option_function<std::string>(
          "--device", [&device, devices](const std::string& name) { device = devices.at(name); },
          "Buffers in host memory (cpu) or on the GPU of local rank % GPUs (cuda)")
      ->transform(CLI::IsMember(keys, CLI::ignore_case))
      ->default_str(device == BenchDevice::kCuda ? "cuda" : "cpu");
}

void add_sweep_options(CLI::App& command, SweepOptions& options) {
  add_size_option(command, "-b,--minbytes", options.min_bytes, "First size (K, M, G suffixes)");
  add_size_option(command, "-e,--maxbytes", options.max_bytes, "Last size, inclusive");
  command.add_option("-f,--stepfactor", options.step_factor, "Multiply the size by this each step")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  add_dtype_option(command, options.dtype);
  command.add_option("-n,--iters", options.iterations, "Timed iterations per path and size")
      ->check(CLI::Range(1, 1 << 20));
  command.add_option("-w,--warmup_iters", options.warmup, "Untimed iterations before them")
      ->check(CLI::Range(0, 1 << 20));
  command.add_flag("--csv", options.csv, "Print the table as CSV on stdout (notes on stderr)");
  add_progress_options(command, options.progress);
}

void add_progress_options(CLI::App& command, ProgressMode& mode) {
  command
      .add_option_function<std::string>(
          "--progress", [&mode](const std::string& text) { mode = parse_progress_mode(text); },
          "Rank 0's progress on stderr: auto (redrawn in place on a terminal, else a line every "
          "few seconds and one per row), always (in place even when stderr is not a terminal), "
          "never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
  command.add_flag_callback(
      "-q,--quiet", [&mode] { mode = ProgressMode::kNever; }, "No progress: --progress never");
}

void validate_sweep_options(const SweepOptions& options) {
  if (options.max_bytes < options.min_bytes) {
    throw CLI::ValidationError("--maxbytes", "must be at least --minbytes");
  }
}

}  // namespace herd::bench
