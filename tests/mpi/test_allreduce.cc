// Multi-rank test of herd::allreduce through the whole runtime.
//
// Sweeps every dtype x op x count {0, 1, 7, 1023, 2^20+3} x in place or not,
// plus prescale/postscale cases and integer sums, averages and products that
// overflow and must wrap around (two's complement), submitting a whole round asynchronously in a
// per-rank random order and then waiting for all of it (negotiation and
// fusion see many names at once). The sweep runs twice under the same names
// (the second round replays the response cache; it leaves out 2^20+3, which
// adds nothing there but time). Then 4 threads per rank each submit 25 names
// of their own in random order, 3 steps with the same names.
//
// Inputs differ by rank, tensor and round, and are chosen so that every
// partial result is exact in the dtype (except the wrap cases, whose
// expected values wrap in uint64_t and then in the dtype); the expected value of each element is
// computed here by folding the simulated ranks in int64_t or double, never
// through herd. Run by ctest under mpiexec at 1..4 ranks and HERD_* settings,
// and across emulated hosts (tests/multihost) with --no-large: the sweep
// without its 2^20+3 count, whose filling and checking on every rank take
// most of the time there (the allreduce demo reduces large tensors there).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

constexpr DataType kDtypes[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                                DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                                DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
constexpr int kNumDtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProduct};
constexpr int64_t kLargeCount = (int64_t{1} << 20) + 3;
constexpr int64_t kCounts[] = {0, 1, 7, 1023, kLargeCount};
constexpr int64_t kThreadCounts[] = {0, 1, 7, 1023, 4099};
constexpr int kThreads = 4;
constexpr int kTensorsPerThread = 25;
constexpr int kThreadSteps = 3;

struct Spec {
  std::string name;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::vector<int64_t> shape;
  bool in_place = false;
  double prescale = 1.0;
  double postscale = 1.0;
  bool wrap = false;  // integer inputs near the type's limits (wrap_k), so results overflow
  uint64_t salt = 0;  // varies the data by tensor and round

  int64_t count() const {
    int64_t n = 1;
    for (int64_t extent : shape) n *= extent;
    return n;
  }
  bool scaled() const { return prescale != 1.0 || postscale != 1.0; }
};

std::vector<int64_t> shape_of(int64_t count) {
  if (count == 0) return {4, 0};
  if (count == 1) return {};  // a scalar
  if (count == 1023) return {3, 11, 31};
  return {count};
}

// Inputs are k * step for an integer k in [lo, hi]. For sum and average the
// bounds keep every partial sum of `size` inputs exact in the dtype (floats:
// within the integers, or halves/quarters, that the format holds exactly);
// scaled cases leave room for prescale 0.5 and postscale 4.
struct Range {
  int64_t lo;
  int64_t hi;
  double step;
};

Range input_range(const Spec& s, int size) {
  const bool minmax = (s.op == ReduceOp::kMin || s.op == ReduceOp::kMax) && !s.scaled();
  auto symmetric = [&](int64_t cap, double step) { return Range{-cap / size, cap / size, step}; };
  switch (s.dtype) {
    case DataType::kUInt8: return minmax ? Range{0, 255, 1} : Range{0, 255 / size, 1};
    case DataType::kInt8: return minmax ? Range{-128, 127, 1} : symmetric(127, 1);
    case DataType::kInt16: return minmax ? Range{INT16_MIN, INT16_MAX, 1} : symmetric(INT16_MAX, 1);
    case DataType::kInt32:
      return minmax ? Range{INT32_MIN, INT32_MAX, 1} : symmetric(int64_t{1} << 30, 1);
    case DataType::kInt64:
      if (minmax) return Range{-(int64_t{1} << 61), int64_t{1} << 61, 1};
      return symmetric(int64_t{1} << (s.scaled() ? 40 : 60), 1);
    case DataType::kFloat16: return symmetric(s.scaled() ? 1024 : 2048, 1);
    case DataType::kBFloat16: return symmetric(s.scaled() ? 128 : 256, 1);
    case DataType::kFloat32: return symmetric(int64_t{1} << (s.scaled() ? 22 : 23), 0.5);
    case DataType::kFloat64: return symmetric(int64_t{1} << (s.scaled() ? 48 : 50), 0.25);
  }
  return Range{0, 0, 1};
}

// A wrap case's input: within 6 of the type's largest value at even indices
// and of its lowest at odd ones (uint8: always near 255), so that any two
// ranks' sum, and product, overflow the type.
int64_t wrap_k(const Spec& s, int rank, int64_t index) {
  const int64_t d = (index + rank) % 7;
  if (index % 2 == 0 || s.dtype == DataType::kUInt8) return int_max(s.dtype) - d;
  return int_min(s.dtype) + d;
}

// The integer k of element `index` on `rank`. Products use +-1 and +-2
// (unsigned: 1 and 2), the 2s only while 2^size fits in int8.
int64_t input_k(const Spec& s, const Range& range, int rank, int size, int64_t index) {
  if (s.wrap) return wrap_k(s, rank, index);
  const uint64_t h = mix64(s.salt * 0x100000001b3ULL + static_cast<uint64_t>(rank) * 0x51ed2705ULL +
                           static_cast<uint64_t>(index) * 0x2545f491ULL);
  if (s.op == ReduceOp::kProduct) {
    const int64_t magnitude = (size <= 6 && h % 3 == 0) ? 2 : 1;
    const bool negative = s.dtype != DataType::kUInt8 && (h >> 32) % 2 == 1;
    return negative ? -magnitude : magnitude;
  }
  // h scaled into [0, width) by the high half of a 128-bit product: uniform
  // enough here, and far cheaper than a 64-bit division per element.
  const uint64_t width = static_cast<uint64_t>(range.hi) - static_cast<uint64_t>(range.lo) + 1;
  const auto scaled = static_cast<uint64_t>((static_cast<unsigned __int128>(h) * width) >> 64);
  return range.lo + static_cast<int64_t>(scaled);
}

int64_t expected_int(const Spec& s, const Range& range, int size, int64_t index) {
  if (s.wrap) {
    // Sum or product modulo 2^64, then modulo 2^bits of the dtype (which
    // divides 2^64); an average divides the wrapped sum, truncating.
    uint64_t acc = 0;
    for (int r = 0; r < size; ++r) {
      const auto v = static_cast<uint64_t>(wrap_k(s, r, index));
      acc = r == 0 ? v : (s.op == ReduceOp::kProduct ? acc * v : acc + v);
    }
    const int64_t wrapped = wrap_integer(s.dtype, acc);
    return s.op == ReduceOp::kAverage ? wrapped / size : wrapped;
  }
  int64_t acc = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t v = scale_integer(s.dtype, input_k(s, range, r, size, index), s.prescale);
    acc = r == 0 ? v : fold(s.op, acc, v);
  }
  if (s.op == ReduceOp::kAverage) return average_integer(s.dtype, acc, size, s.postscale);
  return scale_integer(s.dtype, acc, s.postscale);
}

double expected_float(const Spec& s, const Range& range, int size, int64_t index) {
  double acc = 0;
  for (int r = 0; r < size; ++r) {
    const double v =
        static_cast<double>(input_k(s, range, r, size, index)) * range.step * s.prescale;
    acc = r == 0 ? v : fold(s.op, acc, v);
  }
  if (s.op == ReduceOp::kAverage) acc /= size;
  return acc * s.postscale;
}

// Every result is exact except an average that the dtype cannot hold (or, for
// a rank count that is not a power of two, one that double already rounded):
// there herd may land on either neighbour, 1 ulp of the dtype away.
double tolerance(const Spec& s, int size, double expected) {
  if (s.op != ReduceOp::kAverage) return 0;
  const bool power_of_two = (size & (size - 1)) == 0;
  if (power_of_two && representable(s.dtype, expected)) return 0;
  return ulp(s.dtype, expected);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Tensor {
  Spec spec;
  std::vector<uint64_t> input;   // 8-byte aligned storage, never empty
  std::vector<uint64_t> output;  // unused in place
  herd::Handle handle;
  std::string error;

  void* in() { return input.data(); }
  void* out() { return spec.in_place ? input.data() : output.data(); }
};

void fill(Tensor& t, int rank, int size) {
  const Spec& s = t.spec;
  const std::size_t words =
      (static_cast<std::size_t>(s.count()) * dtype_bytes(s.dtype) + 7) / 8 + 1;
  t.input.assign(words, 0);
  if (!s.in_place) t.output.assign(words, 0xdedededededededeULL);  // garbage to overwrite
  const Range range = input_range(s, size);
  for (int64_t i = 0; i < s.count(); ++i) {
    const int64_t k = input_k(s, range, rank, size, i);
    if (is_integer(s.dtype)) {
      store_int(s.dtype, t.in(), i, k);
    } else {
      store_float(s.dtype, t.in(), i, static_cast<double>(k) * range.step);
    }
  }
}

void check(Tensor& t, int rank, int size, CaseCheck& c) {
  const Spec& s = t.spec;
  const Range range = input_range(s, size);
  for (int64_t i = 0; i < s.count(); ++i) {
    if (is_integer(s.dtype)) {
      const int64_t expected = expected_int(s, range, size, i);
      const int64_t actual = load_int(s.dtype, t.out(), i);
      if (actual != expected) c.mismatch(i, std::to_string(expected), std::to_string(actual));
    } else {
      const double expected = expected_float(s, range, size, i);
      const double actual = load_float(s.dtype, t.out(), i);
      if (!(std::fabs(actual - expected) <= tolerance(s, size, expected))) {
        c.mismatch(i, double_string(expected), double_string(actual));
      }
    }
  }
  if (s.in_place) return;
  // herd must not write the input of an out-of-place operation.
  for (int64_t i = 0; i < s.count(); ++i) {
    const int64_t k = input_k(s, range, rank, size, i);
    const bool same = is_integer(s.dtype)
                          ? load_int(s.dtype, t.in(), i) == k
                          : load_float(s.dtype, t.in(), i) == static_cast<double>(k) * range.step;
    if (!same) {
      c.fail("input element " + std::to_string(i) + " was modified");
      break;
    }
  }
}

// Submits every spec in an order shuffled by `rng`, waits for all, checks all.
void run_batch(const std::vector<Spec>& specs, std::mt19937& rng, const std::string& label,
               Recorder& rec, bool print_times = false) {
  const auto start = std::chrono::steady_clock::now();
  const int rank = herd::rank();
  const int size = herd::size();
  std::vector<Tensor> tensors(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    tensors[i].spec = specs[i];
    fill(tensors[i], rank, size);
  }
  const double filled = seconds_since(start);
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i : order) {
    Tensor& t = tensors[i];
    const herd::TensorView in{t.in(), t.spec.dtype, t.spec.shape};
    const herd::TensorView out{t.out(), t.spec.dtype, t.spec.shape};
    try {
      t.handle =
          herd::allreduce_async(t.spec.name, in, out, t.spec.op, t.spec.prescale, t.spec.postscale);
    } catch (const herd::Error& e) {
      t.error = std::string("allreduce_async threw: ") + e.what();
    }
  }
  for (std::size_t i : order) {
    Tensor& t = tensors[i];
    if (!t.handle.valid()) continue;
    try {
      herd::wait(t.handle);
      if (!herd::poll(t.handle)) t.error = "poll is false after wait";
    } catch (const herd::Error& e) {
      t.error = std::string("wait threw: ") + e.what();
    }
  }
  const double reduced = seconds_since(start);
  for (Tensor& t : tensors) {
    CaseCheck c(rec, label + " " + t.spec.name);
    if (!t.error.empty()) {
      c.fail(t.error);
    } else {
      check(t, rank, size, c);
    }
  }
  if (print_times && rank == 0) {
    std::printf("%s: %zu tensors; fill %.2f s, allreduce %.2f s, check %.2f s\n", label.c_str(),
                tensors.size(), filled, reduced - filled, seconds_since(start) - reduced);
  }
}

std::vector<Spec> sweep_specs(int round, bool with_large) {
  std::vector<Spec> specs;
  for (DataType dtype : kDtypes) {
    for (ReduceOp op : kOps) {
      for (int64_t count : kCounts) {
        if (count == kLargeCount && !with_large) continue;
        for (bool in_place : {false, true}) {
          Spec s;
          s.name = "sweep/" + dtype_name(dtype) + "/" + op_name(op) + "/n" + std::to_string(count) +
                   (in_place ? "/inplace" : "/outofplace");
          s.dtype = dtype;
          s.op = op;
          s.shape = shape_of(count);
          s.in_place = in_place;
          s.salt = specs.size() * 16 + static_cast<uint64_t>(round);
          specs.push_back(s);
        }
      }
    }
  }
  return specs;
}

// Scaled cases: powers of two, exact for every dtype, and for integers also
// 0.25 and 3, where truncation toward zero and saturation show, and an
// average with postscale 3, one truncation of the sum times 3 / p.
std::vector<Spec> scale_specs(int round) {
  struct Scales {
    double pre;
    double post;
    bool integers_only;
  };
  const Scales kScales[] = {{0.5, 1, false}, {1, 4, false}, {0.5, 4, false}, {0.25, 3, true}};
  std::vector<Spec> specs;
  for (DataType dtype : kDtypes) {
    for (const Scales& scales : kScales) {
      if (scales.integers_only && !is_integer(dtype)) continue;
      std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax};
      if (scales.integers_only) ops.push_back(ReduceOp::kAverage);
      for (ReduceOp op : ops) {
        Spec s;
        s.name = "scale/" + dtype_name(dtype) + "/" + op_name(op) + "/pre" +
                 double_string(scales.pre) + "/post" + double_string(scales.post);
        s.dtype = dtype;
        s.op = op;
        s.in_place = specs.size() % 2 == 0;
        s.shape = shape_of(s.in_place ? 1023 : 7);
        s.prescale = scales.pre;
        s.postscale = scales.post;
        s.salt = (1000 + specs.size()) * 16 + static_cast<uint64_t>(round);
        specs.push_back(s);
      }
    }
  }
  return specs;
}

// Integer sums, averages and products whose inputs lie next to the type's
// limits: on 2 or more ranks every element overflows and must wrap.
std::vector<Spec> wrap_specs(int round) {
  std::vector<Spec> specs;
  for (DataType dtype : kDtypes) {
    if (!is_integer(dtype)) continue;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct}) {
      Spec s;
      s.name = "wrap/" + dtype_name(dtype) + "/" + op_name(op);
      s.dtype = dtype;
      s.op = op;
      s.wrap = true;
      s.in_place = specs.size() % 2 == 0;
      s.shape = shape_of(1023);
      s.salt = (3000 + specs.size()) * 16 + static_cast<uint64_t>(round);
      specs.push_back(s);
    }
  }
  return specs;
}

// Thread `thread`'s 25 names; the same signatures at every step, new data.
std::vector<Spec> thread_specs(int thread, int step) {
  std::vector<Spec> specs;
  for (int k = 0; k < kTensorsPerThread; ++k) {
    Spec s;
    s.name = "thread" + std::to_string(thread) + "/tensor" + std::to_string(k);
    s.dtype = kDtypes[(k + thread) % kNumDtypes];
    s.op = kOps[(k / 3 + thread) % 5];
    s.shape = shape_of(kThreadCounts[k % 5]);
    s.in_place = (k + thread) % 2 == 0;
    if (s.op == ReduceOp::kSum && k % 4 == 1) {
      s.prescale = 0.5;
      s.postscale = 4;
    }
    s.salt = (5000 + thread * 100 + k) * 16 + static_cast<uint64_t>(step);
    specs.push_back(s);
  }
  return specs;
}

void run_thread(int thread, Recorder& rec) {
  try {
    std::mt19937 rng(static_cast<unsigned>(herd::rank() * 1000 + thread));
    for (int step = 1; step <= kThreadSteps; ++step) {
      run_batch(thread_specs(thread, step), rng, "step" + std::to_string(step), rec);
    }
  } catch (const std::exception& e) {
    rec.fail("thread" + std::to_string(thread), std::string("threw: ") + e.what());
  }
}

// herd's view of the job against MPI's own.
void check_identity(Recorder& rec) {
  int mpi_rank = -1;
  int mpi_size = -1;
  int thread_level = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  MPI_Query_thread(&thread_level);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi_rank, MPI_INFO_NULL, &node);
  int node_rank = -1;
  int node_size = -1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  auto expect_eq = [&](const char* what, long long expected, long long actual) {
    rec.check(expected == actual, "identity",
              std::string(what) + ": expected " + std::to_string(expected) + ", actual " +
                  std::to_string(actual));
  };
  expect_eq("is_initialized", 1, herd::is_initialized() ? 1 : 0);
  expect_eq("rank", mpi_rank, herd::rank());
  expect_eq("size", mpi_size, herd::size());
  expect_eq("local_rank", node_rank, herd::local_rank());
  expect_eq("local_size", node_size, herd::local_size());
  expect_eq("MPI thread level", MPI_THREAD_MULTIPLE, thread_level);
}

}  // namespace

int main(int argc, char** argv) {
  const bool large = !(argc == 2 && std::string(argv[1]) == "--no-large");
  if (argc > 2 || (argc == 2 && large)) {
    std::fprintf(stderr, "usage: test_allreduce [--no-large]\n");
    return 2;
  }
  if (!init_herd("test_allreduce")) return 1;
  const int rank = herd::rank();
  Recorder rec("test_allreduce", rank);
  auto start = std::chrono::steady_clock::now();
  try {
    check_identity(rec);
    std::mt19937 rng(static_cast<unsigned>(rank));
    for (int round = 1; round <= 2; ++round) {
      std::vector<Spec> specs = sweep_specs(round, large && round == 1);
      std::vector<Spec> scaled = scale_specs(round);
      specs.insert(specs.end(), scaled.begin(), scaled.end());
      std::vector<Spec> wrapping = wrap_specs(round);
      specs.insert(specs.end(), wrapping.begin(), wrapping.end());
      run_batch(specs, rng, "round" + std::to_string(round), rec, true);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(run_thread, t, std::ref(rec));
    for (std::thread& thread : threads) thread.join();
    if (rank == 0) std::printf("threads: %.2f s\n", seconds_since(start));
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
