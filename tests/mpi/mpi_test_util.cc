// Harness of the multi-rank API tests; see mpi_test_util.h.
#include "mpi_test_util.h"

#include "herd/herd.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace herd_test {

using herd::DataType;
using herd::ReduceOp;

// --- Recorder ---------------------------------------------------------------

void Recorder::pass() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++passed_;
}

void Recorder::fail(const std::string& case_name, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++failed_;
  }
  print_line("rank " + std::to_string(rank_) + " case " + case_name + ": " + message);
}

bool Recorder::check(bool ok, const std::string& case_name, const std::string& message) {
  if (ok) {
    pass();
  } else {
    fail(case_name, message);
  }
  return ok;
}

void Recorder::print_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fprintf(stderr, "%s %s\n", program_.c_str(), line.c_str());
  std::fflush(stderr);
}

int Recorder::finish() {
  long long local[2];
  {
    std::lock_guard<std::mutex> lock(mutex_);
    local[0] = passed_;
    local[1] = failed_;
  }
  long long total[2] = {local[0], local[1]};
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Allreduce(local, total, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  std::printf("%s rank %d: %lld passed, %lld failed\n", program_.c_str(), rank_, local[0],
              local[1]);
  if (total[1] != local[1]) {
    std::printf("%s rank %d: %lld failed on other ranks\n", program_.c_str(), rank_,
                total[1] - local[1]);
  }
  std::fflush(stdout);
  return total[1] == 0 ? 0 : 1;
}

// --- CaseCheck --------------------------------------------------------------

void CaseCheck::mismatch(int64_t index, const std::string& expected, const std::string& actual) {
  if (mismatches_++ < kMaxPrinted) {
    recorder_.print_line("rank " + std::to_string(recorder_.rank()) + " case " + name_ + " index " +
                         std::to_string(index) + ": expected " + expected + ", actual " + actual);
  }
}

void CaseCheck::fail(const std::string& message) {
  failed_ = true;
  recorder_.print_line("rank " + std::to_string(recorder_.rank()) + " case " + name_ + ": " +
                       message);
}

void CaseCheck::done() {
  if (done_) return;
  done_ = true;
  if (ok()) {
    recorder_.pass();
    return;
  }
  if (mismatches_ > kMaxPrinted) {
    recorder_.print_line("rank " + std::to_string(recorder_.rank()) + " case " + name_ + ": " +
                         std::to_string(mismatches_) + " mismatched elements in all");
  }
  std::lock_guard<std::mutex> lock(recorder_.mutex_);
  ++recorder_.failed_;
}

// --- names ------------------------------------------------------------------

std::string dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
  }
  return "?";
}

std::string op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kAdasum: return "adasum";
  }
  return "?";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string double_string(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

// --- dtypes -----------------------------------------------------------------

bool is_integer(DataType dtype) {
  return dtype == DataType::kUInt8 || dtype == DataType::kInt8 || dtype == DataType::kInt16 ||
         dtype == DataType::kInt32 || dtype == DataType::kInt64;
}

std::size_t dtype_bytes(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8: return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

int64_t int_min(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return 0;
    case DataType::kInt8: return -128;
    case DataType::kInt16: return std::numeric_limits<int16_t>::min();
    case DataType::kInt32: return std::numeric_limits<int32_t>::min();
    default: return std::numeric_limits<int64_t>::min();
  }
}

int64_t int_max(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return 255;
    case DataType::kInt8: return 127;
    case DataType::kInt16: return std::numeric_limits<int16_t>::max();
    case DataType::kInt32: return std::numeric_limits<int32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

int64_t wrap_integer(DataType dtype, uint64_t value) {
  const int bits = static_cast<int>(dtype_bytes(dtype)) * 8;
  // Modular for int64 too: C++20's rule, which GCC and Clang already follow.
  if (bits == 64) return static_cast<int64_t>(value);
  const uint64_t modulus = uint64_t{1} << bits;
  const int64_t low = static_cast<int64_t>(value % modulus);
  if (dtype == DataType::kUInt8) return low;
  return low > int_max(dtype) ? low - static_cast<int64_t>(modulus) : low;
}

namespace {

[[noreturn]] void test_bug(const std::string& what) {
  std::fprintf(stderr, "test bug: %s\n", what.c_str());
  std::abort();
}

// A 16-bit float with `mantissa_bits` fraction bits and 15 - mantissa_bits
// exponent bits: binary16 has 10, bfloat16 has 7.
struct Half16 {
  int mantissa_bits;
  int exponent_bits() const { return 15 - mantissa_bits; }
  int bias() const { return (1 << (exponent_bits() - 1)) - 1; }
  int min_exponent() const { return 1 - bias(); }
};

constexpr Half16 kFloat16{10};
constexpr Half16 kBFloat16{7};

// Exact encoding or false.
bool encode_exact(Half16 f, double value, uint16_t* bits) {
  if (!std::isfinite(value)) return false;
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  double a = std::fabs(value);
  if (a == 0) {
    *bits = sign;
    return true;
  }
  int e = 0;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exponent = e - 1;          // a = (2m) * 2^exponent
  if (exponent > f.bias()) return false;
  if (exponent >= f.min_exponent()) {
    double fraction = std::ldexp(2 * m - 1, f.mantissa_bits);
    if (fraction != std::floor(fraction)) return false;
    *bits = static_cast<uint16_t>(sign | ((exponent + f.bias()) << f.mantissa_bits) |
                                  static_cast<int>(fraction));
    return true;
  }
  double units = std::ldexp(a, f.mantissa_bits - f.min_exponent());  // subnormal
  if (units != std::floor(units) || units >= std::ldexp(1.0, f.mantissa_bits)) return false;
  *bits = static_cast<uint16_t>(sign | static_cast<int>(units));
  return true;
}

double decode(Half16 f, uint16_t bits) {
  int exponent_field = (bits & 0x7fff) >> f.mantissa_bits;
  int fraction = bits & ((1 << f.mantissa_bits) - 1);
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent_field == (1 << f.exponent_bits()) - 1) {
    return fraction ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent_field == 0) return sign * std::ldexp(fraction, f.min_exponent() - f.mantissa_bits);
  return sign * std::ldexp(1.0 + std::ldexp(fraction, -f.mantissa_bits), exponent_field - f.bias());
}

template <typename T>
T* at(void* data, int64_t index) {
  return static_cast<T*>(data) + index;
}

template <typename T>
T get(const void* data, int64_t index) {
  T value;
  std::memcpy(&value, static_cast<const T*>(data) + index, sizeof(T));
  return value;
}

}  // namespace

uint16_t encode_float16(double value) {
  uint16_t bits = 0;
  if (!encode_exact(kFloat16, value, &bits))
    test_bug("float16 cannot hold " + double_string(value));
  return bits;
}

uint16_t encode_bfloat16(double value) {
  uint16_t bits = 0;
  if (!encode_exact(kBFloat16, value, &bits)) {
    test_bug("bfloat16 cannot hold " + double_string(value));
  }
  return bits;
}

double decode_float16(uint16_t bits) { return decode(kFloat16, bits); }
double decode_bfloat16(uint16_t bits) { return decode(kBFloat16, bits); }

void store_int(DataType dtype, void* data, int64_t index, int64_t value) {
  if (!is_integer(dtype) || value < int_min(dtype) || value > int_max(dtype)) {
    test_bug(dtype_name(dtype) + " cannot hold " + std::to_string(value));
  }
  switch (dtype) {
    case DataType::kUInt8: *at<uint8_t>(data, index) = static_cast<uint8_t>(value); break;
    case DataType::kInt8: *at<int8_t>(data, index) = static_cast<int8_t>(value); break;
    case DataType::kInt16: *at<int16_t>(data, index) = static_cast<int16_t>(value); break;
    case DataType::kInt32: *at<int32_t>(data, index) = static_cast<int32_t>(value); break;
    default: *at<int64_t>(data, index) = value; break;
  }
}

int64_t load_int(DataType dtype, const void* data, int64_t index) {
  switch (dtype) {
    case DataType::kUInt8: return get<uint8_t>(data, index);
    case DataType::kInt8: return get<int8_t>(data, index);
    case DataType::kInt16: return get<int16_t>(data, index);
    case DataType::kInt32: return get<int32_t>(data, index);
    case DataType::kInt64: return get<int64_t>(data, index);
    default: test_bug("load_int of " + dtype_name(dtype));
  }
}

void store_float(DataType dtype, void* data, int64_t index, double value) {
  const bool wide = dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
  if (wide && !representable(dtype, value)) {
    test_bug(dtype_name(dtype) + " cannot hold " + double_string(value));
  }
  switch (dtype) {  // the 16-bit encoders check exactness themselves
    case DataType::kFloat16: *at<uint16_t>(data, index) = encode_float16(value); break;
    case DataType::kBFloat16: *at<uint16_t>(data, index) = encode_bfloat16(value); break;
    case DataType::kFloat32: *at<float>(data, index) = static_cast<float>(value); break;
    default: *at<double>(data, index) = value; break;
  }
}

double load_float(DataType dtype, const void* data, int64_t index) {
  switch (dtype) {
    case DataType::kFloat16: return decode_float16(get<uint16_t>(data, index));
    case DataType::kBFloat16: return decode_bfloat16(get<uint16_t>(data, index));
    case DataType::kFloat32: return get<float>(data, index);
    case DataType::kFloat64: return get<double>(data, index);
    default: test_bug("load_float of " + dtype_name(dtype));
  }
}

bool representable(DataType dtype, double value) {
  uint16_t bits = 0;
  switch (dtype) {
    case DataType::kFloat16: return encode_exact(kFloat16, value, &bits);
    case DataType::kBFloat16: return encode_exact(kBFloat16, value, &bits);
    case DataType::kFloat32:
      return std::isfinite(value) && std::fabs(value) <= std::numeric_limits<float>::max() &&
             static_cast<double>(static_cast<float>(value)) == value;
    case DataType::kFloat64: return std::isfinite(value);
    default: return false;
  }
}

double ulp(DataType dtype, double value) {
  int mantissa_bits = 52;
  int min_exponent = -1022;
  switch (dtype) {
    case DataType::kFloat16:
      mantissa_bits = 10;
      min_exponent = -14;
      break;
    case DataType::kBFloat16:
      mantissa_bits = 7;
      min_exponent = -126;
      break;
    case DataType::kFloat32:
      mantissa_bits = 23;
      min_exponent = -126;
      break;
    default: break;
  }
  int exponent = value == 0 ? min_exponent : std::max(std::ilogb(value), min_exponent);
  return std::ldexp(1.0, exponent - mantissa_bits);
}

// --- shared by the collective tests -----------------------------------------

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

std::vector<uint64_t> storage_for(DataType dtype, int64_t count) {
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_bytes(dtype);
  return std::vector<uint64_t>(bytes / 8 + 1, 0);
}

void store_value(DataType dtype, void* data, int64_t index, double value) {
  if (!is_integer(dtype)) {
    store_float(dtype, data, index, value);
    return;
  }
  if (value != std::floor(value) || std::fabs(value) > 9007199254740992.0) {
    test_bug(dtype_name(dtype) + " value " + double_string(value) + " is not an exact integer");
  }
  store_int(dtype, data, index, static_cast<int64_t>(value));
}

double load_value(DataType dtype, const void* data, int64_t index) {
  if (is_integer(dtype)) return static_cast<double>(load_int(dtype, data, index));
  return load_float(dtype, data, index);
}

namespace {

struct ReduceRange {
  int64_t lo;
  int64_t hi;
  double step;
};

bool scaled(const ReduceSpec& s) { return s.prescale != 1.0 || s.postscale != 1.0; }

// Bounds on k; every value stays within 2^53 so double folds it exactly.
ReduceRange reduce_range(const ReduceSpec& s, int size) {
  const bool minmax = (s.op == ReduceOp::kMin || s.op == ReduceOp::kMax) && !scaled(s);
  auto symmetric = [&](int64_t cap, double step) {
    return ReduceRange{-cap / size, cap / size, step};
  };
  switch (s.dtype) {
    case DataType::kUInt8: return minmax ? ReduceRange{0, 255, 1} : ReduceRange{0, 255 / size, 1};
    case DataType::kInt8: return minmax ? ReduceRange{-128, 127, 1} : symmetric(127, 1);
    case DataType::kInt16: return minmax ? ReduceRange{-32768, 32767, 1} : symmetric(32767, 1);
    case DataType::kInt32:
      return minmax ? ReduceRange{int_min(s.dtype), int_max(s.dtype), 1}
                    : symmetric(int64_t{1} << 30, 1);
    case DataType::kInt64: return symmetric(int64_t{1} << (scaled(s) ? 40 : 50), 1);
    case DataType::kFloat16: return symmetric(scaled(s) ? 1024 : 2048, 1);
    case DataType::kBFloat16: return symmetric(scaled(s) ? 128 : 256, 1);
    case DataType::kFloat32: return symmetric(int64_t{1} << (scaled(s) ? 22 : 23), 0.5);
    case DataType::kFloat64: return symmetric(int64_t{1} << (scaled(s) ? 48 : 50), 0.25);
  }
  return ReduceRange{0, 0, 1};
}

int64_t reduce_k(const ReduceSpec& s, int rank, int size, int64_t index) {
  const uint64_t h = mix64(s.salt * 0x100000001b3ULL + static_cast<uint64_t>(rank) * 0x9e3779b1ULL +
                           static_cast<uint64_t>(index) * 0x2545f491ULL);
  if (s.op == ReduceOp::kProduct) {
    const int64_t magnitude = (size <= 6 && h % 3 == 0) ? 2 : 1;
    const bool negative = s.dtype != DataType::kUInt8 && (h >> 32) % 2 == 1;
    return negative ? -magnitude : magnitude;
  }
  const ReduceRange range = reduce_range(s, size);
  const uint64_t width = static_cast<uint64_t>(range.hi - range.lo) + 1;
  return range.lo + static_cast<int64_t>(h % width);
}

}  // namespace

int64_t scale_integer(DataType dtype, int64_t value, double scale) {
  if (scale == 1.0) return value;
  const double x = std::trunc(static_cast<double>(value) * scale);
  if (x <= static_cast<double>(int_min(dtype))) return int_min(dtype);
  if (x >= static_cast<double>(int_max(dtype))) return int_max(dtype);
  return static_cast<int64_t>(x);
}

int64_t average_integer(DataType dtype, int64_t sum, int size, double postscale) {
  if (postscale == 1.0) return sum / size;  // truncates toward zero
  return scale_integer(dtype, sum, postscale / size);
}

double reduce_input(const ReduceSpec& spec, int rank, int size, int64_t index) {
  return static_cast<double>(reduce_k(spec, rank, size, index)) * reduce_range(spec, size).step;
}

double reduce_expected(const ReduceSpec& spec, int size, int64_t index) {
  if (is_integer(spec.dtype)) {
    int64_t acc = 0;
    for (int r = 0; r < size; ++r) {
      const int64_t v = scale_integer(spec.dtype, reduce_k(spec, r, size, index), spec.prescale);
      acc = r == 0 ? v : fold(spec.op, acc, v);
    }
    if (spec.op == ReduceOp::kAverage) {
      return static_cast<double>(average_integer(spec.dtype, acc, size, spec.postscale));
    }
    return static_cast<double>(scale_integer(spec.dtype, acc, spec.postscale));
  }
  double acc = 0;
  for (int r = 0; r < size; ++r) {
    const double v = reduce_input(spec, r, size, index) * spec.prescale;
    acc = r == 0 ? v : fold(spec.op, acc, v);
  }
  if (spec.op == ReduceOp::kAverage) acc /= size;
  return acc * spec.postscale;
}

double reduce_tolerance(const ReduceSpec& spec, int size, double expected) {
  if (spec.op != ReduceOp::kAverage || is_integer(spec.dtype)) return 0;
  const bool power_of_two = (size & (size - 1)) == 0;
  if (power_of_two && representable(spec.dtype, expected)) return 0;
  return ulp(spec.dtype, expected);
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const herd::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not a herd::Error) ") + e.what();
  }
  return "(no error)";
}

MpiWorld init_mpi(int* argc, char*** argv) {
  MpiWorld world;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &world.provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  return world;
}

bool init_herd(const char* program) {
  try {
    herd::init();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "%s: herd::init threw: %s\n", program, e.what());
    return false;
  }
  return true;
}

bool shutdown_herd(const Recorder& rec) {
  try {
    herd::shutdown();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "%s rank %d: shutdown threw: %s\n", rec.program().c_str(), rec.rank(),
                 e.what());
    return false;
  }
  return true;
}

std::string from_rank_0(std::string text) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<std::size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

void expect_throws(Recorder& rec, const std::string& case_name, const std::string& what,
                   const std::function<void()>& call) {
  try {
    call();
    rec.fail(case_name, what + " did not throw");
  } catch (const herd::Error&) {
    rec.pass();
  } catch (const std::exception& e) {
    rec.fail(case_name, what + " threw a non-herd::Error: " + e.what());
  }
}

int finish_program_owned_mpi(Recorder& rec) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    // herd finalized an MPI it did not own; nothing collective is left to do.
    rec.fail("shutdown", "herd::shutdown finalized the program's MPI");
    return rec.finish();
  }
  const int code = rec.finish();
  MPI_Finalize();
  return code;
}

}  // namespace herd_test
