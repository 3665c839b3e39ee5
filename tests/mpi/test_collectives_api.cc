// Multi-rank test of herd's collectives besides allreduce, through the whole
// runtime: allgather, broadcast, alltoall and reducescatter (barrier is in
// test_grouped.cc).
//
// Each batch is submitted asynchronously in a per-rank random order, then
// waited for and checked. Inputs differ by rank and case; every expected
// element is computed here in closed form from the simulated ranks' inputs:
//  - allgather: rank r's rows (first dims like (r*3)%5, zeros included) land
//    after the rows of ranks 0..r-1; every dtype, trailing dims [], [3], [2,3],
//    up to ~2^20 elements; repeated steps under one name with the same and
//    with changed first dims;
//  - broadcast: every root, every dtype, 0, 1 and 7 elements, and 2^20+3
//    for uint8, int64 and float32;
//  - alltoall: rank s sends splits_s[d] consecutive rows to rank d; rank r
//    receives the blocks of ranks 0..p-1 in order, and received_splits[s] =
//    splits_s[r]; uneven splits with zeros, even split (empty splits);
//  - reducescatter: the allreduce result, of which rank i keeps R/p rows
//    (+1 if i < R%p) starting at row i*(R/p) + min(i, R%p).
// Run by ctest under mpiexec at 1..4 ranks.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;
using Shape = std::vector<int64_t>;

constexpr DataType kDtypes[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                                DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                                DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
constexpr int64_t kLarge = (int64_t{1} << 20) + 3;

struct Job {
  Recorder& rec;
  int rank;
  int size;
  std::mt19937 rng;
};

// Element `index` of `rank`'s data in case `salt`: an integer in [-48, 48]
// ([0, 96] for uint8), halved or quartered for floats, plus a rank offset
// where the dtype has room, so each dtype holds it exactly and blocks of
// different ranks differ.
double element(DataType dtype, uint64_t salt, int rank, int64_t index) {
  const uint64_t h = mix64(salt * 0x100000001b3ULL + static_cast<uint64_t>(rank) * 0x51ed2705ULL +
                           static_cast<uint64_t>(index) * 0x2545f491ULL);
  const double k = static_cast<double>(static_cast<int64_t>(h % 97) - 48);
  switch (dtype) {
    case DataType::kUInt8: return k + 48;
    case DataType::kInt8: return k;
    case DataType::kInt16: return k + rank * 128.0;
    case DataType::kInt32: return k + rank * 1048576.0;
    case DataType::kInt64: return k + rank * 1099511627776.0;
    case DataType::kFloat16:
    case DataType::kBFloat16: return k * 0.5;
    case DataType::kFloat32: return k * 0.5 + rank * 4096.0;
    case DataType::kFloat64: return k * 0.25 + rank * 8589934592.0;
  }
  return 0;
}

void fill(DataType dtype, void* data, int64_t count, uint64_t salt, int rank) {
  for (int64_t i = 0; i < count; ++i) store_value(dtype, data, i, element(dtype, salt, rank, i));
}

// Compares `count` elements of `data` from `at` on with rank `rank`'s
// elements from `from` on.
void expect_elements(CaseCheck& c, DataType dtype, const void* data, int64_t at, int64_t count,
                     uint64_t salt, int rank, int64_t from) {
  for (int64_t i = 0; i < count; ++i) {
    const double expected = element(dtype, salt, rank, from + i);
    const double actual = load_value(dtype, data, at + i);
    if (actual != expected) c.mismatch(at + i, double_string(expected), double_string(actual));
  }
}

bool expect_output(CaseCheck& c, const herd::Tensor& out, DataType dtype, const Shape& shape) {
  if (out.dtype() == dtype && out.shape() == shape) return true;
  c.fail("output is " + dtype_name(out.dtype()) + " " + shape_string(out.shape()) + ", expected " +
         dtype_name(dtype) + " " + shape_string(shape));
  return false;
}

Shape with_first(int64_t first, const Shape& trailing) {
  Shape shape{first};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  return shape;
}

// One operation of a batch: submit() starts it, check() judges its result.
struct Op {
  std::string label;
  std::function<herd::Handle()> submit;
  std::function<void(CaseCheck&)> check;
};

void run_batch(Job& job, const std::string& batch, std::vector<Op> ops) {
  std::vector<std::size_t> order(ops.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), job.rng);
  std::vector<herd::Handle> handles(ops.size());
  std::vector<std::string> errors(ops.size());
  for (std::size_t i : order) {
    try {
      handles[i] = ops[i].submit();
    } catch (const herd::Error& e) {
      errors[i] = std::string("submission threw: ") + e.what();
    }
  }
  for (std::size_t i : order) {
    if (!handles[i].valid()) continue;
    try {
      herd::wait(handles[i]);
      if (!herd::poll(handles[i])) errors[i] = "poll is false after wait";
    } catch (const herd::Error& e) {
      errors[i] = std::string("wait threw: ") + e.what();
    }
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    CaseCheck c(job.rec, batch + " " + ops[i].label);
    if (!errors[i].empty()) {
      c.fail(errors[i]);
    } else {
      ops[i].check(c);
    }
  }
}

// --- allgather --------------------------------------------------------------

Op gather_op(const Job& job, const std::string& name, DataType dtype, const Shape& trailing,
             std::vector<int64_t> first_dims, uint64_t salt) {
  struct State {
    std::vector<uint64_t> input;
    herd::Tensor output{DataType::kUInt8, {5}};  // herd must replace this
  };
  auto state = std::make_shared<State>();
  const int64_t row = num_elements(trailing);
  const int64_t count = first_dims[job.rank] * row;
  state->input = storage_for(dtype, count);
  fill(dtype, state->input.data(), count, salt, job.rank);
  const Shape shape = with_first(first_dims[job.rank], trailing);
  Op op;
  op.label = name + " " + dtype_name(dtype) + " " + shape_string(shape);
  op.submit = [=] {
    return herd::allgather_async(name, {state->input.data(), dtype, shape}, &state->output);
  };
  op.check = [=, rank = job.rank](CaseCheck& c) {
    const int64_t total = std::accumulate(first_dims.begin(), first_dims.end(), int64_t{0});
    if (!expect_output(c, state->output, dtype, with_first(total, trailing))) return;
    int64_t at = 0;
    for (std::size_t s = 0; s < first_dims.size(); ++s) {
      const int64_t n = first_dims[s] * row;
      expect_elements(c, dtype, state->output.data(), at, n, salt, static_cast<int>(s), 0);
      at += n;
    }
    expect_elements(c, dtype, state->input.data(), 0, count, salt, rank, 0);
  };
  return op;
}

void test_allgather(Job& job) {
  const int p = job.size;
  auto dims = [p](std::function<int64_t(int)> f) {
    std::vector<int64_t> d(p);
    for (int r = 0; r < p; ++r) d[r] = f(r);
    return d;
  };
  std::vector<Op> ops;
  uint64_t salt = 100;
  for (DataType dtype : kDtypes) {
    for (const Shape& trailing : {Shape{}, Shape{3}, Shape{2, 3}}) {
      const std::string name = "ag/" + dtype_name(dtype) + "/t" + shape_string(trailing);
      ops.push_back(gather_op(job, name, dtype, trailing,
                              dims([](int r) { return int64_t{(r * 3) % 5}; }), ++salt));
    }
    ops.push_back(gather_op(job, "ag/" + dtype_name(dtype) + "/empty", dtype, {3},
                            dims([](int) { return int64_t{0}; }), ++salt));
  }
  // ~2^20 elements in all, first dims differing by rank.
  for (DataType dtype : {DataType::kFloat32, DataType::kInt8}) {
    ops.push_back(gather_op(job, "ag/large/" + dtype_name(dtype), dtype, {3},
                            dims([p](int r) { return (int64_t{1} << 20) / (3 * p) + 5 * r; }),
                            ++salt));
  }
  run_batch(job, "allgather", std::move(ops));
  // The same name at every step: same dims (cache), then rank 0's first dim changing.
  const int64_t kRank0Dims[] = {2, 2, 5, 0, 1};
  for (int step = 0; step < 5; ++step) {
    std::vector<Op> steps;
    steps.push_back(gather_op(job, "ag/steps/same", DataType::kFloat32, {3},
                              dims([](int r) { return int64_t{r + 1}; }), 200 + step));
    steps.push_back(gather_op(job, "ag/steps/changing", DataType::kInt32, {2},
                              dims([&](int r) { return r == 0 ? kRank0Dims[step] : 3; }),
                              300 + step));
    run_batch(job, "allgather step" + std::to_string(step), std::move(steps));
  }
}

// --- broadcast --------------------------------------------------------------

Op broadcast_op(const Job& job, const std::string& name, DataType dtype, const Shape& shape,
                int root, uint64_t salt) {
  auto data = std::make_shared<std::vector<uint64_t>>();
  const int64_t count = num_elements(shape);
  *data = storage_for(dtype, count);
  // Non-roots start with data of their own, which herd must overwrite.
  fill(dtype, data->data(), count, job.rank == root ? salt : salt + 1, job.rank);
  Op op;
  op.label = name;
  op.submit = [=] { return herd::broadcast_async(name, {data->data(), dtype, shape}, root); };
  op.check = [=](CaseCheck& c) {
    expect_elements(c, dtype, data->data(), 0, count, salt, root, 0);
  };
  return op;
}

void test_broadcast(Job& job) {
  const Shape kShapes[] = {{0}, {3, 0}, {}, {7}, {kLarge}};
  for (int root = 0; root < job.size; ++root) {
    std::vector<Op> ops;
    uint64_t salt = 1000 + 100 * root;
    for (DataType dtype : kDtypes) {
      for (const Shape& shape : kShapes) {
        if (shape == Shape{kLarge} && dtype != DataType::kFloat32 && dtype != DataType::kUInt8 &&
            dtype != DataType::kInt64) {
          continue;
        }
        const std::string name = "bcast/" + dtype_name(dtype) + "/" + shape_string(shape);
        ops.push_back(broadcast_op(job, name, dtype, shape, root, salt += 2));
      }
    }
    run_batch(job, "broadcast root" + std::to_string(root), std::move(ops));
  }
}

// --- alltoall ---------------------------------------------------------------

// sent[s][d]: rows rank s sends to rank d. `even` submits empty splits.
Op alltoall_op(const Job& job, const std::string& name, DataType dtype, const Shape& trailing,
               std::vector<std::vector<int64_t>> sent, bool even, bool want_received,
               uint64_t salt) {
  struct State {
    std::vector<uint64_t> input;
    herd::Tensor output;
    std::vector<int64_t> received{-7};  // herd must replace this
  };
  auto state = std::make_shared<State>();
  const int me = job.rank;
  const int64_t row = num_elements(trailing);
  const std::vector<int64_t>& mine = sent[me];
  const int64_t rows = std::accumulate(mine.begin(), mine.end(), int64_t{0});
  state->input = storage_for(dtype, rows * row);
  fill(dtype, state->input.data(), rows * row, salt, me);
  const Shape shape = with_first(rows, trailing);
  const std::vector<int64_t> splits = even ? std::vector<int64_t>{} : mine;
  Op op;
  op.label = name + " " + dtype_name(dtype) + " splits " + shape_string(mine);
  op.submit = [=] {
    return herd::alltoall_async(name, {state->input.data(), dtype, shape}, splits, &state->output,
                                want_received ? &state->received : nullptr);
  };
  op.check = [=](CaseCheck& c) {
    std::vector<int64_t> expected_received;
    for (const std::vector<int64_t>& from : sent) expected_received.push_back(from[me]);
    const int64_t total =
        std::accumulate(expected_received.begin(), expected_received.end(), int64_t{0});
    if (want_received && state->received != expected_received) {
      c.fail("received_splits " + shape_string(state->received) + ", expected " +
             shape_string(expected_received));
    }
    if (!expect_output(c, state->output, dtype, with_first(total, trailing))) return;
    int64_t at = 0;
    for (std::size_t s = 0; s < sent.size(); ++s) {
      const int64_t skip = std::accumulate(sent[s].begin(), sent[s].begin() + me, int64_t{0});
      const int64_t n = sent[s][me] * row;
      expect_elements(c, dtype, state->output.data(), at, n, salt, static_cast<int>(s), skip * row);
      at += n;
    }
    expect_elements(c, dtype, state->input.data(), 0, rows * row, salt, me, 0);
  };
  return op;
}

std::vector<std::vector<int64_t>> matrix(int p, std::function<int64_t(int s, int d)> f) {
  std::vector<std::vector<int64_t>> m(p, std::vector<int64_t>(p));
  for (int s = 0; s < p; ++s) {
    for (int d = 0; d < p; ++d) m[s][d] = f(s, d);
  }
  return m;
}

void test_alltoall(Job& job) {
  const int p = job.size;
  std::vector<Op> ops;
  uint64_t salt = 2000;
  const auto uneven = matrix(p, [](int s, int d) { return int64_t{(s + 2 * d) % 3}; });
  for (DataType dtype : kDtypes) {
    const std::string type = dtype_name(dtype);
    ops.push_back(alltoall_op(job, "a2a/uneven/" + type, dtype, {2}, uneven, false,
                              dtype != DataType::kInt8, ++salt));
    ops.push_back(alltoall_op(job, "a2a/even/" + type, dtype, {2},
                              matrix(p, [](int, int) { return int64_t{2}; }), true, true, ++salt));
  }
  ops.push_back(
      alltoall_op(job, "a2a/scalar_rows", DataType::kFloat64, {}, uneven, false, true, ++salt));
  ops.push_back(alltoall_op(job, "a2a/nothing", DataType::kFloat32, {2},
                            matrix(p, [](int, int) { return int64_t{0}; }), false, true, ++salt));
  ops.push_back(alltoall_op(job, "a2a/even_empty", DataType::kInt32, {4},
                            matrix(p, [](int, int) { return int64_t{0}; }), true, true, ++salt));
  ops.push_back(alltoall_op(job, "a2a/large", DataType::kFloat32, {5},
                            matrix(p, [](int s, int d) { return int64_t{9000 + 17 * s + 5 * d}; }),
                            false, true, ++salt));
  run_batch(job, "alltoall", std::move(ops));
  for (int step = 0; step < 3; ++step) {  // one name, splits changing
    std::vector<Op> steps;
    steps.push_back(
        alltoall_op(job, "a2a/steps", DataType::kInt64, {3},
                    matrix(p, [step](int s, int d) { return int64_t{(s * 5 + d * 3 + step) % 4}; }),
                    false, true, 2100 + step));
    run_batch(job, "alltoall step" + std::to_string(step), std::move(steps));
  }
}

// --- reducescatter ----------------------------------------------------------

Op reducescatter_op(const Job& job, const std::string& name, const ReduceSpec& spec, int64_t rows,
                    int64_t row) {
  struct State {
    std::vector<uint64_t> input;
    herd::Tensor output{DataType::kUInt8, {3}};
  };
  auto state = std::make_shared<State>();
  const int me = job.rank;
  const int p = job.size;
  state->input = storage_for(spec.dtype, rows * row);
  for (int64_t i = 0; i < rows * row; ++i) {
    store_value(spec.dtype, state->input.data(), i, reduce_input(spec, me, p, i));
  }
  Op op;
  op.label = name;
  op.submit = [=] {
    return herd::reducescatter_async(name, {state->input.data(), spec.dtype, {rows, row}},
                                     &state->output, spec.op, spec.prescale, spec.postscale);
  };
  op.check = [=](CaseCheck& c) {
    const int64_t mine = rows / p + (me < rows % p ? 1 : 0);
    const int64_t first = me * (rows / p) + std::min<int64_t>(me, rows % p);
    if (!expect_output(c, state->output, spec.dtype, {mine, row})) return;
    for (int64_t i = 0; i < mine * row; ++i) {
      const double expected = reduce_expected(spec, p, first * row + i);
      const double actual = load_value(spec.dtype, state->output.data(), i);
      if (!(std::fabs(actual - expected) <= reduce_tolerance(spec, p, expected))) {
        c.mismatch(i, double_string(expected), double_string(actual));
      }
    }
  };
  return op;
}

void test_reducescatter(Job& job) {
  const int p = job.size;
  std::vector<Op> ops;
  uint64_t salt = 3000;
  std::vector<int64_t> row_counts = {0, 1, 7, 1000};  // and p - 1 (fewer rows than ranks)
  if (p > 2) row_counts.push_back(p - 1);
  for (DataType dtype :
       {DataType::kFloat32, DataType::kInt32, DataType::kFloat16, DataType::kInt16}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (int64_t rows : row_counts) {
        ReduceSpec spec;
        spec.dtype = dtype;
        spec.op = op;
        spec.salt = ++salt;
        const std::string name =
            "rs/" + dtype_name(dtype) + "/" + op_name(op) + "/rows" + std::to_string(rows);
        ops.push_back(reducescatter_op(job, name, spec, rows, 4));
      }
    }
  }
  for (DataType dtype : {DataType::kFloat32, DataType::kInt32}) {
    ReduceSpec spec;
    spec.dtype = dtype;
    spec.prescale = 0.5;
    spec.postscale = dtype == DataType::kInt32 ? 3 : 4;
    spec.salt = ++salt;
    ops.push_back(reducescatter_op(job, "rs/scaled/" + dtype_name(dtype), spec, 11, 4));
  }
  run_batch(job, "reducescatter", std::move(ops));
}

}  // namespace

int main() {
  if (!init_herd("test_collectives_api")) return 1;
  const int rank = herd::rank();
  Recorder rec("test_collectives_api", rank);
  Job job{rec, rank, herd::size(), std::mt19937(static_cast<unsigned>(rank) + 17)};
  const auto start = std::chrono::steady_clock::now();
  const std::pair<const char*, void (*)(Job&)> kTests[] = {
      {"allgather", test_allgather},
      {"broadcast", test_broadcast},
      {"alltoall", test_alltoall},
      {"reducescatter", test_reducescatter},
  };
  for (const auto& test : kTests) {
    try {
      test.second(job);
    } catch (const std::exception& e) {
      rec.fail(test.first, std::string("threw: ") + e.what());
    }
    if (rank == 0) {
      std::printf("%s done at %.2f s\n", test.first,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
