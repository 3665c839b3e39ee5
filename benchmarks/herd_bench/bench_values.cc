#include "benchmarks/herd_bench/bench_values.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "ops/half.h"

namespace herd::bench {
namespace {

// The repeating pattern of the inputs: element i starts from i % kPeriod.
constexpr int64_t kPeriod = 8;

bool is_floating(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

// Relative size of one unit in the last place, for the average's tolerance.
double unit_roundoff(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return 0x1p-10;
    case DataType::kBFloat16: return 0x1p-7;
    case DataType::kFloat32: return 0x1p-23;
    case DataType::kFloat64: return 0x1p-52;
    default: return 0;
  }
}

// The largest n such that the dtype holds every integer 0..n exactly.
int64_t largest_exact_integer(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return 255;
    case DataType::kInt8: return 127;
    case DataType::kInt16: return INT16_MAX;
    case DataType::kInt32: return INT32_MAX;
    case DataType::kFloat16: return 2048;
    case DataType::kBFloat16: return 256;
    case DataType::kFloat32: return int64_t{1} << 24;
    case DataType::kInt64:  // load() returns a double
    case DataType::kFloat64: return int64_t{1} << 53;
  }
  throw std::invalid_argument("herd-bench: unsupported dtype " + to_string(dtype));
}

// Counts the elements of `data` farther than relative_tolerance * |expected|
// from expected(i), and prints the first one after `where` ("rank 1: ring
// path") to stderr.
template <typename Expected>
int64_t count_mismatches(DataType dtype, const void* data, int64_t count, Expected&& expected,
                         double relative_tolerance, const std::string& where) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double actual = load(dtype, data, i);
    if (std::fabs(actual - want) <= relative_tolerance * std::fabs(want)) continue;  // NaN: wrong
    if (wrong == 0) {
      std::fprintf(stderr, "%s, index %lld of %lld: expected %g, actual %g\n", where.c_str(),
                   static_cast<long long>(i), static_cast<long long>(count), want, actual);
    }
    ++wrong;
  }
  return wrong;
}

}  // namespace

// With base = i % 8 and p ranks:
//   sum, min, max: base + rank + 1   -> sum p*base + p(p+1)/2, min base+1, max base+p
//   average:       base + 2*rank + 1 -> sum p*(base+p), so the average base+p is an
//                                       integer (no truncation, even for int types)
//   product:       1 or 2 by the parity of base + rank -> a power of two
// Every partial sum is at most the full one, p(p+7) for the average (the
// largest), so the results are exact with up to 8 ranks in int8, 12 in uint8
// and bfloat16 (integers up to 256), 41 in float16, 177 in int16 and far more
// in the wider types; the product 2^ceil(p/2) fits int8 up to 12 ranks and
// int16 up to 28.
double input_value(ReduceOp op, int rank, int64_t i) {
  const int64_t base = i % kPeriod;
  switch (op) {
    case ReduceOp::kProduct: return (base + rank) % 2 == 0 ? 1.0 : 2.0;
    case ReduceOp::kAverage: return static_cast<double>(base + 2 * rank + 1);
    default: return static_cast<double>(base + rank + 1);
  }
}

double expected_value(ReduceOp op, int ranks, int64_t i) {
  const double p = ranks;
  const double base = static_cast<double>(i % kPeriod);
  switch (op) {
    case ReduceOp::kSum: return p * base + p * (p + 1) / 2;
    case ReduceOp::kAverage: return base + p;
    case ReduceOp::kMin: return base + 1;
    case ReduceOp::kMax: return base + p;
    case ReduceOp::kProduct: {
      // Rank r contributes a 2 when base + r is odd.
      const int twos = (i % kPeriod) % 2 == 0 ? ranks / 2 : (ranks + 1) / 2;
      return std::ldexp(1.0, twos);
    }
    case ReduceOp::kAdasum: break;  // not element-wise; not benchmarked
  }
  return NAN;
}

bool is_supported(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64: return true;
  }
  return false;
}

double load(DataType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(data)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DataType::kFloat16: return ops::float16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBFloat16: return ops::bfloat16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DataType::kFloat32: return static_cast<const float*>(data)[i];
    case DataType::kFloat64: return static_cast<const double*>(data)[i];
  }
  throw std::invalid_argument("herd-bench: unsupported dtype " + to_string(dtype));
}

void store(DataType dtype, void* data, int64_t i, double value) {
  switch (dtype) {
    case DataType::kUInt8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(value); return;
    case DataType::kInt8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(value); return;
    case DataType::kInt16: static_cast<int16_t*>(data)[i] = static_cast<int16_t>(value); return;
    case DataType::kInt32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value); return;
    case DataType::kInt64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(value); return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(data)[i] = ops::float_to_float16(static_cast<float>(value));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = ops::float_to_bfloat16(static_cast<float>(value));
      return;
    case DataType::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(value); return;
    case DataType::kFloat64: static_cast<double*>(data)[i] = value; return;
  }
  throw std::invalid_argument("herd-bench: unsupported dtype " + to_string(dtype));
}

void fill_input(DataType dtype, ReduceOp op, int rank, void* data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) store(dtype, data, i, input_value(op, rank, i));
}

int64_t count_wrong(DataType dtype, ReduceOp op, int ranks, int rank, const void* data,
                    int64_t count, const std::string& path) {
  return count_wrong_from(dtype, op, ranks, rank, data, 0, count, path);
}

int64_t count_wrong_from(DataType dtype, ReduceOp op, int ranks, int rank, const void* data,
                         int64_t first, int64_t count, const std::string& path) {
  const bool rounded = op == ReduceOp::kAverage && is_floating(dtype);
  return count_mismatches(
      dtype, data, count, [&](int64_t i) { return expected_value(op, ranks, first + i); },
      rounded ? unit_roundoff(dtype) : 0.0, "rank " + std::to_string(rank) + ": " + path + " path");
}

double block_value(DataType dtype, int ranks, int blocks, int source, int block, int64_t i) {
  // The largest value, at source p-1, block blocks-1, i % period = period-1,
  // is ranks * blocks * period.
  const int64_t period = largest_exact_integer(dtype) / (int64_t{ranks} * blocks);
  if (period < 1) {
    throw std::invalid_argument("herd-bench: " + to_string(dtype) + " cannot hold " +
                                std::to_string(int64_t{ranks} * blocks) + " distinct blocks");
  }
  return static_cast<double>(1 + source + int64_t{ranks} * (block + blocks * (i % period)));
}

void fill_block(DataType dtype, int ranks, int blocks, int source, int block, void* data,
                int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    store(dtype, data, i, block_value(dtype, ranks, blocks, source, block, i));
  }
}

int64_t count_wrong_block(DataType dtype, int ranks, int blocks, int source, int block, int rank,
                          const void* data, int64_t count, const std::string& path) {
  return count_mismatches(
      dtype, data, count,
      [&](int64_t i) { return block_value(dtype, ranks, blocks, source, block, i); }, 0.0,
      "rank " + std::to_string(rank) + ": " + path + " path, block " + std::to_string(block) +
          " of rank " + std::to_string(source));
}

}  // namespace herd::bench
