// Harness shared by the multi-rank tests of herd's public API (tests/mpi/).
//
// Recorder counts passed and failed cases. A failing case prints
// "rank R case C: ..." lines, and for element comparisons only the first few
// mismatches ("rank R case C index I: expected E, actual A") plus a total, so
// a broken 2^20-element tensor prints a handful of lines, not a million.
// finish() sums the counts over MPI_COMM_WORLD when MPI is still usable and
// returns the exit code, non-zero on every rank if any rank failed.
//
// The element codecs read and write every herd::DataType from double or
// int64_t; float16/bfloat16 encoding is exact-only (the tests use values the
// format represents exactly) and independent of herd's own converters.
// Recorder may be used from several threads at once; the rest are pure.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "herd/types.h"

namespace herd_test {

class Recorder {
 public:
  Recorder(std::string program, int rank) : program_(std::move(program)), rank_(rank) {}

  void pass();
  void fail(const std::string& case_name, const std::string& message);
  // Records a pass if `ok`, else a failure with `message`; returns ok.
  bool check(bool ok, const std::string& case_name, const std::string& message);

  // Prints this rank's "<program> rank R: N passed, M failed" and returns 0
  // when no rank failed, 1 otherwise. Sums over MPI_COMM_WORLD when MPI is
  // initialized and not finalized; otherwise judges this rank alone.
  int finish();

  int rank() const { return rank_; }
  const std::string& program() const { return program_; }

 private:
  friend class CaseCheck;
  void print_line(const std::string& line);

  std::mutex mutex_;
  std::string program_;
  int rank_;
  long long passed_ = 0;
  long long failed_ = 0;
};

// Records a pass if `call` throws herd::Error, a failure naming `what`
// otherwise (no exception, or another type).
void expect_throws(Recorder& rec, const std::string& case_name, const std::string& what,
                   const std::function<void()>& call);

// The end of a test program that initialized MPI itself before herd::init:
// fails if herd::shutdown finalized that MPI (then judges this rank alone),
// else gathers the verdict and finalizes. Returns the exit code.
int finish_program_owned_mpi(Recorder& rec);

// One case of element-by-element comparisons. Call mismatch() for each wrong
// element; done() (or the destructor) records the case as passed or failed.
class CaseCheck {
 public:
  CaseCheck(Recorder& recorder, std::string name) : recorder_(recorder), name_(std::move(name)) {}
  ~CaseCheck() { done(); }
  CaseCheck(const CaseCheck&) = delete;
  CaseCheck& operator=(const CaseCheck&) = delete;

  void mismatch(int64_t index, const std::string& expected, const std::string& actual);
  // A failure of the case as a whole (an exception, a wrong flag).
  void fail(const std::string& message);
  void done();
  bool ok() const { return mismatches_ == 0 && !failed_; }

 private:
  static constexpr int64_t kMaxPrinted = 3;
  Recorder& recorder_;
  std::string name_;
  int64_t mismatches_ = 0;
  bool failed_ = false;
  bool done_ = false;
};

// 64-bit mix (splitmix64 finalizer): cheap deterministic pseudo-random data.
// Inline: the tests' reference values call it for every element of every rank.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Names as herd's error messages spell them, written out independently.
std::string dtype_name(herd::DataType dtype);
std::string op_name(herd::ReduceOp op);
std::string shape_string(const std::vector<int64_t>& shape);  // "[4,3]", "[]"
std::string double_string(double value);                      // shortest exact text

bool is_integer(herd::DataType dtype);
std::size_t dtype_bytes(herd::DataType dtype);
// Range of an integer dtype.
int64_t int_min(herd::DataType dtype);
int64_t int_max(herd::DataType dtype);
// `value` modulo 2^bits of the integer dtype, as the dtype reads it (two's
// complement for the signed types): what a wrapping sum or product computed
// in uint64_t leaves in the dtype.
int64_t wrap_integer(herd::DataType dtype, uint64_t value);

// float16 (IEEE binary16) and bfloat16 bits. encode_* abort on a value the
// format cannot hold exactly: that is a bug in the test, not in herd.
uint16_t encode_float16(double value);
uint16_t encode_bfloat16(double value);
double decode_float16(uint16_t bits);
double decode_bfloat16(uint16_t bits);

// Element `index` of a dense buffer of `dtype`. store_int needs an integer
// dtype and a value in range; store_float a float dtype and an exact value.
void store_int(herd::DataType dtype, void* data, int64_t index, int64_t value);
int64_t load_int(herd::DataType dtype, const void* data, int64_t index);
void store_float(herd::DataType dtype, void* data, int64_t index, double value);
double load_float(herd::DataType dtype, const void* data, int64_t index);

// True when the float dtype holds `value` exactly.
bool representable(herd::DataType dtype, double value);
// Distance between `value` and the next float of `dtype` away from zero.
double ulp(herd::DataType dtype, double value);

// --- shared by the collective tests (test_collectives_api, test_grouped) ----

// Product of the extents; 1 for a scalar (empty shape).
int64_t num_elements(const std::vector<int64_t>& shape);

// Zeroed, 8-byte aligned room for `count` elements of `dtype`; never empty,
// so data() is never null.
std::vector<uint64_t> storage_for(herd::DataType dtype, int64_t count);

// Element `index` of any dtype as a double: integers through store_int /
// load_int (the value must be integral and exact in double), floats through
// store_float / load_float (the value must be exact in the dtype).
void store_value(herd::DataType dtype, void* data, int64_t index, double value);
double load_value(herd::DataType dtype, const void* data, int64_t index);

// Inputs of a reduction (allreduce, reducescatter, grouped allreduce) chosen
// so that every partial result is exact in the dtype and in double: integers
// k * step(dtype) with |k| bounded by the dtype's exact range over `size`
// ranks (products use +-1 and +-2, unsigned 1 and 2); scaled cases leave
// room for prescale 0.5 and postscale 4. Integer scaling multiplies in double
// and truncates toward zero, saturating at the dtype's range; an integer
// average truncates toward zero.
struct ReduceSpec {
  herd::DataType dtype = herd::DataType::kFloat32;
  herd::ReduceOp op = herd::ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  uint64_t salt = 0;  // varies the data by case
};
double reduce_input(const ReduceSpec& spec, int rank, int size, int64_t index);
// The reduction of reduce_input over ranks 0..size-1 at `index`, folded here
// in int64_t or double, never through herd.
double reduce_expected(const ReduceSpec& spec, int size, int64_t index);
// 0, or 1 ulp of the dtype for an average the dtype (or, for a rank count
// that is not a power of two, double) could not hold exactly.
double reduce_tolerance(const ReduceSpec& spec, int size, double expected);

// Integer scaling as herd promises it: multiply in double, truncate toward
// zero (std::trunc), saturate to the dtype.
int64_t scale_integer(herd::DataType dtype, int64_t value, double scale);

// An integer average of `sum` over `size` ranks with its postscale: the
// truncating integer quotient when postscale is 1, else one scaling by
// postscale / size.
int64_t average_integer(herd::DataType dtype, int64_t sum, int size, double postscale);

// One step of a reduction folded here: acc (op) value; average adds.
template <typename T>
T fold(herd::ReduceOp op, T acc, T value) {
  switch (op) {
    case herd::ReduceOp::kSum:
    case herd::ReduceOp::kAverage: return acc + value;
    case herd::ReduceOp::kMin: return std::min(acc, value);
    case herd::ReduceOp::kMax: return std::max(acc, value);
    case herd::ReduceOp::kProduct: return acc * value;
    case herd::ReduceOp::kAdasum: break;  // not element-wise
  }
  return acc;
}

// --- program scaffolding shared by every test's main() ----------------------

// what() of the herd::Error `run` throws; "(no error)" when it returns.
std::string error_of(const std::function<void()>& run);

// For a program that owns MPI: MPI_Init_thread asking MPI_THREAD_MULTIPLE,
// the level provided, and this process's rank and size in MPI_COMM_WORLD.
struct MpiWorld {
  int provided = 0;
  int rank = 0;
  int size = 1;
};
MpiWorld init_mpi(int* argc, char*** argv);

// Rank 0's `text` on every rank of MPI_COMM_WORLD (collective).
std::string from_rank_0(std::string text);

// herd::init() for a program that leaves MPI to herd; on a herd::Error prints
// "<program>: herd::init threw: ..." and returns false.
bool init_herd(const char* program);
// herd::shutdown(); on a herd::Error prints
// "<program> rank R: shutdown threw: ..." and returns false.
bool shutdown_herd(const Recorder& rec);

}  // namespace herd_test
