// allreduce_demo: herd's main job from start to finish, and the first program
// to read when learning herd.
//
// Each rank fills --tensors tensors of --elements elements with values unique
// to (rank, tensor, index), submits them all with herd::allreduce_async under
// the names "demo/layer<t>", waits for every handle and checks every element
// against the closed-form result. It does this --iterations times and, in each
// iteration, also times MPI_Allreduce of the same tensors on the same buffers.
// Rank 0 prints one row per iteration with the slowest rank's times.
//
// Run it with scripts/demo.sh, or: mpirun -np 2 build/examples/allreduce_demo --help
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <herd/herd.h>

namespace {

using herd::DataType;
using herd::ReduceOp;

struct Options {
  int tensors = 8;
  int64_t elements = int64_t{1} << 20;  // per tensor
  int iterations = 10;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// C++17 has no 16-bit float types: the demo keeps float16 and bfloat16 values
// as their bits in uint16_t. The from_* conversions are exact for every value;
// the to_* conversions round and are meant for normal, finite values such as
// the small integers the demo writes.
double from_bfloat16(uint16_t bits) {
  const uint32_t widened = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &widened, sizeof value);
  return value;
}

uint16_t to_bfloat16(double value) {
  const float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);  // round to even
}

double from_float16(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);  // zero or subnormal
  } else if (exponent == 0x1F) {
    magnitude = mantissa == 0 ? HUGE_VAL : NAN;
  } else {
    magnitude = std::ldexp(mantissa + 0x400, exponent - 25);
  }
  return (bits & 0x8000) ? -magnitude : magnitude;
}

uint16_t to_float16(double value) {
  if (value == 0) return 0;
  int exponent;  // |value| = fraction * 2^exponent, fraction in [0.5, 1)
  const double fraction = std::frexp(std::fabs(value), &exponent);
  // 11 significant bits; a carry out of the mantissa correctly bumps the exponent.
  const int mantissa = static_cast<int>(std::lround(fraction * 2048)) - 0x400;
  const int sign = value < 0 ? 0x8000 : 0;
  return static_cast<uint16_t>(sign | (((exponent + 14) << 10) + mantissa));
}

double load(DataType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DataType::kFloat32: return static_cast<const float*>(data)[i];
    case DataType::kFloat64: return static_cast<const double*>(data)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DataType::kFloat16: return from_float16(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBFloat16: return from_bfloat16(static_cast<const uint16_t*>(data)[i]);
    default: throw std::invalid_argument("unsupported dtype " + herd::to_string(dtype));
  }
}

void store(DataType dtype, void* data, int64_t i, double value) {
  switch (dtype) {
    case DataType::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(value); break;
    case DataType::kFloat64: static_cast<double*>(data)[i] = value; break;
    case DataType::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value); break;
    case DataType::kFloat16: static_cast<uint16_t*>(data)[i] = to_float16(value); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(data)[i] = to_bfloat16(value); break;
    default: throw std::invalid_argument("unsupported dtype " + herd::to_string(dtype));
  }
}

// The input of element `index` of tensor `tensor` on `rank`. Sum, average, min
// and max get small integers, so their results are exact in every dtype; the
// product gets 1s and 2s, so its result is a power of two (exact in float16 up
// to 15 ranks).
double input_value(ReduceOp op, int rank, int tensor, int64_t index) {
  const int64_t base = (index + tensor) % 8;
  if (op == ReduceOp::kProduct) return (base + rank) % 2 == 0 ? 1.0 : 2.0;
  return static_cast<double>(base + rank + 1);
}

// input_value reduced over ranks 0..size-1, in closed form.
double expected_value(ReduceOp op, DataType dtype, int size, int tensor, int64_t index) {
  const double base = static_cast<double>((index + tensor) % 8);
  const double sum = size * base + size * (size + 1) / 2.0;  // sum of base + r + 1
  switch (op) {
    case ReduceOp::kSum: return sum;
    case ReduceOp::kAverage:  // integer averages truncate toward zero
      return dtype == DataType::kInt32 ? std::trunc(sum / size) : sum / size;
    case ReduceOp::kMin: return base + 1;
    case ReduceOp::kMax: return base + size;
    case ReduceOp::kProduct: {
      // A rank contributes a 2 when base + rank is odd.
      const int twos = static_cast<int64_t>(base) % 2 == 0 ? size / 2 : (size + 1) / 2;
      return std::ldexp(1.0, twos);
    }
    case ReduceOp::kAdasum: break;  // not element-wise; the demo does not run it
  }
  return NAN;
}

// How far a result may be from the closed form: nothing for integers; for
// floating types some rounding per rank, which only large jobs ever need.
double tolerance(DataType dtype, int size, double expected) {
  double epsilon = 0;
  if (dtype == DataType::kFloat16) epsilon = 0x1p-10;
  if (dtype == DataType::kBFloat16) epsilon = 0x1p-7;
  if (dtype == DataType::kFloat32) epsilon = 0x1p-23;
  if (dtype == DataType::kFloat64) epsilon = 0x1p-52;
  return epsilon * size * std::fabs(expected);
}

// MPI's type for the comparison. MPI has no 16-bit floats, so for those it
// reduces the same bytes as uint16: about the same work, meaningless values.
MPI_Datatype mpi_type(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kInt32: return MPI_INT32_T;
    default: return MPI_UINT16_T;
  }
}

// MPI has no average: herd's average is a sum and a scale, so MPI sums.
MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
    default: return MPI_SUM;
  }
}

// The slowest rank's time, on rank 0.
double slowest(double seconds, MPI_Comm comm) {
  double max_seconds = 0;
  MPI_Reduce(&seconds, &max_seconds, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  return max_seconds;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One row of the table. algbw: bytes a rank reduces per second. busbw scales
// it by 2(p-1)/p, the share of its buffer each rank sends (and receives) in a
// ring allreduce, so that it compares with link bandwidth at any rank count.
void print_row(const std::string& label, double bytes, int size, double herd_s, double mpi_s) {
  const double algbw = bytes / herd_s / 1e9;
  const double busbw = algbw * 2.0 * (size - 1) / size;
  std::printf("%6s %10.3f %11.3f %11.3f %10.3f %9.2f\n", label.c_str(), herd_s * 1e3, algbw, busbw,
              mpi_s * 1e3, herd_s / mpi_s);
}

// Checks every element of every output against the closed form. At the
// first wrong element, prints it (rank, tensor, index, values) and returns false.
bool check_outputs(const Options& options, const std::vector<std::vector<unsigned char>>& outputs,
                   const std::vector<std::string>& names, int rank, int size, int iteration) {
  for (int t = 0; t < options.tensors; ++t) {
    for (int64_t i = 0; i < options.elements; ++i) {
      const double expected = expected_value(options.op, options.dtype, size, t, i);
      const double actual = load(options.dtype, outputs[t].data(), i);
      if (!(std::fabs(actual - expected) <= tolerance(options.dtype, size, expected))) {
        std::fprintf(stderr,
                     "rank %d: mismatch in iteration %d, tensor %s, index %lld: expected %g, "
                     "actual %g\n",
                     rank, iteration, names[t].c_str(), static_cast<long long>(i), expected,
                     actual);
        return false;
      }
    }
  }
  return true;
}

int run(const Options& options, MPI_Comm comm) {
  const int rank = herd::rank();
  const int size = herd::size();
  const DataType dtype = options.dtype;
  const std::size_t tensor_bytes = options.elements * herd::element_size(dtype);
  const double total_bytes = static_cast<double>(tensor_bytes) * options.tensors;

  std::vector<std::string> names;
  std::vector<std::vector<unsigned char>> inputs, outputs;
  for (int t = 0; t < options.tensors; ++t) {
    names.push_back("demo/layer" + std::to_string(t));
    inputs.emplace_back(tensor_bytes);
    outputs.emplace_back(tensor_bytes);
    for (int64_t i = 0; i < options.elements; ++i) {
      store(dtype, inputs[t].data(), i, input_value(options.op, rank, t, i));
    }
  }

  if (rank == 0) {
    std::printf(
        "herd allreduce_demo: %d ranks, %d tensors x %lld elements of %s (%.1f MiB a rank), "
        "op %s\n",
        size, options.tensors, static_cast<long long>(options.elements),
        herd::to_string(dtype).c_str(), total_bytes / (1 << 20),
        herd::to_string(options.op).c_str());
    std::printf("%6s %10s %11s %11s %10s %9s\n", "iter", "herd ms", "algbw GB/s", "busbw GB/s",
                "MPI ms", "herd/MPI");
  }

  std::vector<double> herd_times, mpi_times;  // on rank 0
  bool any_mismatch = false;
  for (int iteration = 0; iteration < options.iterations && !any_mismatch; ++iteration) {
    // herd: submit every tensor, then wait for all of them.
    MPI_Barrier(comm);
    double start = MPI_Wtime();
    std::vector<herd::Handle> handles;
    for (int t = 0; t < options.tensors; ++t) {
      herd::TensorView input{inputs[t].data(), dtype, {options.elements}};
      herd::TensorView output{outputs[t].data(), dtype, {options.elements}};
      handles.push_back(herd::allreduce_async(names[t], input, output, options.op));
    }
    for (const herd::Handle& handle : handles) herd::wait(handle);
    const double herd_seconds = slowest(MPI_Wtime() - start, comm);

    // Every rank checks its result; all ranks learn whether any was wrong.
    const int mismatch = check_outputs(options, outputs, names, rank, size, iteration) ? 0 : 1;
    int ranks_with_mismatch = 0;
    MPI_Allreduce(&mismatch, &ranks_with_mismatch, 1, MPI_INT, MPI_SUM, comm);
    any_mismatch = ranks_with_mismatch > 0;

    // Raw MPI on the same buffers: one MPI_Allreduce per tensor.
    MPI_Barrier(comm);
    start = MPI_Wtime();
    for (int t = 0; t < options.tensors; ++t) {
      MPI_Allreduce(inputs[t].data(), outputs[t].data(), static_cast<int>(options.elements),
                    mpi_type(dtype), mpi_op(options.op), comm);
    }
    const double mpi_seconds = slowest(MPI_Wtime() - start, comm);

    if (rank == 0) {
      herd_times.push_back(herd_seconds);
      mpi_times.push_back(mpi_seconds);
      print_row(std::to_string(iteration), total_bytes, size, herd_seconds, mpi_seconds);
    }
    if (any_mismatch && rank == 0) {
      std::printf("FAILED: %d of %d ranks got a wrong result; each printed its first to stderr\n",
                  ranks_with_mismatch, size);
    }
  }
  if (rank == 0 && !any_mismatch) {
    print_row("median", total_bytes, size, median(herd_times), median(mpi_times));
    std::printf(
        "verified: all %lld elements correct (%d tensors x %lld elements x %d iterations, "
        "%d ranks)\n",
        static_cast<long long>(options.tensors * options.elements * options.iterations),
        options.tensors, static_cast<long long>(options.elements), options.iterations, size);
    if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
      std::printf("note: MPI has no %s; its column reduces the same bytes as uint16\n",
                  herd::to_string(dtype).c_str());
    }
  }
  return any_mismatch ? 1 : 0;
}

// Adds an option whose values are herd's own names for `choices` ("float32",
// "sum", ...), as herd::to_string spells them.
template <typename Enum>
void add_choice(CLI::App& app, const std::string& flag, Enum& value, const std::string& help,
                std::initializer_list<Enum> choices) {
  std::map<std::string, Enum> by_name;
  std::string names;
  for (Enum choice : choices) {
    by_name[herd::to_string(choice)] = choice;
    names += (names.empty() ? "" : "|") + herd::to_string(choice);
  }
  app.add_option(flag, value, help)
      ->transform(CLI::CheckedTransformer(by_name, CLI::ignore_case).description(""))
      ->type_name(names)
      ->default_str(herd::to_string(value));
}

}  // namespace

int main(int argc, char** argv) {
  // The demo starts MPI itself and keeps its own communicator for the timing
  // and the checks; herd::init then uses this MPI and leaves MPI_Finalize here.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  Options options;
  CLI::App app{"Allreduce many named tensors with herd, verify them and compare with MPI."};
  app.option_defaults()->always_capture_default();
  app.add_option("--tensors", options.tensors, "Tensors per iteration")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--elements", options.elements, "Elements per tensor")
      ->check(CLI::Range(int64_t{0}, int64_t{INT_MAX}));
  app.add_option("--iterations", options.iterations, "Iterations")->check(CLI::Range(1, 1 << 20));
  add_choice(app, "--dtype", options.dtype, "Element type",
             {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
              DataType::kInt32});
  add_choice(
      app, "--op", options.op, "Reduction",
      {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream discard;  // every rank parses; only rank 0 prints
    const int code = rank == 0 ? app.exit(e) : app.exit(e, discard, discard);
    MPI_Finalize();
    return code;
  }

  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int code = 0;
  try {
    herd::init();
    code = run(options, comm);
    herd::shutdown();
  } catch (const std::exception& e) {
    // A rank that fails alone would leave the others waiting: stop the job.
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return code;
}
