// herd-bench: nccl-tests-style bandwidth tables for herd's collectives.
//
//   mpirun -np N herd-bench allreduce -b 4K -e 64M -f 4 -d float32 -o sum -n 20 -w 5 [--csv]
//
// For each size from -b to -e (times -f each step), one row per path (herd's
// runtime, the ring alone, raw MPI, a memcpy ceiling) with the slowest rank's
// time, algbw, busbw and the number of wrong elements. Exits 1 if any element
// was wrong, 2 on a failure. docs/benchmarks.md explains the columns.
//
// The program initializes MPI itself with MPI_THREAD_MULTIPLE, so that a bad
// command line ends cleanly before herd starts; herd::init then uses this MPI
// and leaves MPI_Finalize to main.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <herd/herd.h>

#include "benchmarks/herd_bench/allreduce_bench.h"
#include "benchmarks/herd_bench/table.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using herd::bench::AllreduceBenchOptions;

// A size option: "4K", "64M", ... (table.h's parse_bytes), stored in bytes.
void add_size_option(CLI::App& command, const std::string& flags, int64_t& bytes,
                     const std::string& help) {
  command
      .add_option_function<std::string>(
          flags, [&bytes](const std::string& text) { bytes = herd::bench::parse_bytes(text); },
          help)
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              return herd::bench::parse_bytes(text) > 0 ? std::string()
                                                        : std::string("size must be positive");
            } catch (const std::exception& e) {
              return std::string(e.what());
            }
          },
          "SIZE"))
      ->type_name("SIZE")
      ->default_str(herd::bench::format_bytes(bytes));
}

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

void add_allreduce_options(CLI::App& command, AllreduceBenchOptions& options) {
  add_size_option(command, "-b,--minbytes", options.min_bytes, "First size (K, M, G suffixes)");
  add_size_option(command, "-e,--maxbytes", options.max_bytes, "Last size, inclusive");
  command.add_option("-f,--stepfactor", options.step_factor, "Multiply the size by this each step")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  std::map<std::string, DataType> dtypes;
  for (DataType d :
       {DataType::kUInt8, DataType::kInt8, DataType::kInt32, DataType::kInt64, DataType::kFloat16,
        DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    dtypes[herd::to_string(d)] = d;
  }
  add_enum_option(command, "-d,--datatype", options.dtype, "Element type", dtypes);
  std::map<std::string, ReduceOp> ops{{"avg", ReduceOp::kAverage}};
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    ops[herd::to_string(op)] = op;
  }
  ops["prod"] = ReduceOp::kProduct;
  add_enum_option(command, "-o,--op", options.op, "Reduction", ops);
  command.add_option("-n,--iters", options.iterations, "Timed iterations per path and size")
      ->check(CLI::Range(1, 1 << 20));
  command.add_option("-w,--warmup_iters", options.warmup, "Untimed iterations before them")
      ->check(CLI::Range(0, 1 << 20));
  command.add_flag("--csv", options.csv, "Print the table as CSV on stdout (notes on stderr)");
  command.add_flag("-q,--quiet", options.quiet, "No progress lines on stderr");
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  AllreduceBenchOptions options;
  CLI::App app{"herd-bench: time herd's collectives against the ring alone, MPI and memcpy."};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  CLI::App* allreduce = app.add_subcommand("allreduce", "Allreduce bandwidth sweep");
  add_allreduce_options(*allreduce, options);
  try {
    app.parse(argc, argv);
    if (options.max_bytes < options.min_bytes) {
      throw CLI::ValidationError("--maxbytes", "must be at least --minbytes");
    }
  } catch (const CLI::ParseError& e) {
    std::ostringstream discard;  // every rank parses; rank 0 alone prints
    const int code = rank == 0 ? app.exit(e) : app.exit(e, discard, discard);
    MPI_Finalize();
    return code;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) std::fprintf(stderr, "herd-bench: MPI lacks MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 2;
  }

  MPI_Comm comm;  // the benchmark's own barriers, reductions and MPI path
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int64_t wrong = 0;
  try {
    herd::init();
    wrong = herd::bench::run_allreduce_bench(options, comm);
    herd::shutdown();
  } catch (const std::exception& e) {
    // A rank that fails alone would leave the others waiting: stop the job.
    std::fprintf(stderr, "herd-bench: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0 && wrong > 0) {
    std::fprintf(stderr, "herd-bench: FAILED: %lld wrong elements in all\n",
                 static_cast<long long>(wrong));
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return wrong > 0 ? 1 : 0;
}
