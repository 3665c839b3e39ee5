// Multi-rank test of ReduceOp::kAdasum through the whole runtime (public API).
//
// On a power-of-two number of ranks: several allreduces of float32 and
// float64 submitted together (fused by the runtime, each with its own
// coefficients), one of float16, a grouped allreduce, prescale and postscale,
// each against the pairwise rank-order reference in double
// (tests/unit/collectives/adasum_reference.h), bit-identical on every rank.
// On any number: the refusals at the call with their error kinds (int32 and
// bfloat16: kInvalidArgument; reducescatter, and a set whose size is not a
// power of two: kNotImplemented, naming the size), after which the job still
// reduces. Run by ctest under mpiexec at 1..4 ranks.
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../unit/collectives/adasum_reference.h"
#include "herd/error.h"
#include "herd/float16.h"
#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ErrorKind;
using herd::ReduceOp;
using herd::TensorView;
using herd::collectives::testing::adasum_tree;
using herd::collectives::testing::relative_error;
using namespace herd_test;

bool power_of_two(int n) { return n >= 1 && (n & (n - 1)) == 0; }

// Element i of tensor t on `rank`: directions and norms differ by rank.
double sample(int rank, int t, int64_t i) {
  const double phase = 0.9 * rank + 1.7 * t + 0.31 * static_cast<double>(i);
  return (1.0 + 0.5 * rank) * std::sin(phase) + 0.2 * std::cos(1.9 * phase - rank);
}

// The reference for tensor t of `count` elements, from the values the ranks
// held (`held` rounds a value as the dtype stores it).
std::vector<double> expected(int size, int t, int64_t count, double scale,
                             const std::function<double(double)>& held) {
  std::vector<std::vector<double>> vectors(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < count; ++i)
      vectors[static_cast<std::size_t>(r)].push_back(held(sample(r, t, i)));
  }
  std::vector<double> result = adasum_tree(vectors, 0, static_cast<std::size_t>(size));
  for (double& v : result) v *= scale;
  return result;
}

// Records whether `actual` is within 100 epsilons of `reference` (norm-wise)
// and the same on every rank (compared with rank 0's bytes over MPI).
void check_result(Recorder& rec, const std::string& name, const std::vector<double>& actual,
                  const std::vector<double>& reference, double epsilon) {
  const double error = relative_error(actual, reference);
  rec.check(error <= 100 * epsilon, name,
            "relative error " + double_string(error) + " above " + double_string(100 * epsilon));
  std::vector<double> root = actual;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  rec.check(std::memcmp(root.data(), actual.data(), actual.size() * sizeof(double)) == 0, name,
            "differs from rank 0's result");
}

void test_results(Recorder& rec, int rank, int size) {
  const std::vector<int64_t> counts = {1, 5, 300, 0, 2049};
  // float32 tensors in flight together: the runtime fuses them.
  std::vector<std::vector<float>> floats(counts.size());
  std::vector<herd::Handle> handles;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    for (int64_t i = 0; i < counts[t]; ++i) {
      floats[t].push_back(static_cast<float>(sample(rank, static_cast<int>(t), i)));
    }
    TensorView view{floats[t].data(), DataType::kFloat32, {counts[t]}};
    handles.push_back(
        herd::allreduce_async("adasum.f32." + std::to_string(t), view, view, ReduceOp::kAdasum));
  }
  // A float64 tensor reduced out of place, with both scales.
  std::vector<double> in64, out64(1000);
  for (int64_t i = 0; i < 1000; ++i) in64.push_back(sample(rank, 9, i));
  handles.push_back(herd::allreduce_async(
      "adasum.f64", TensorView{in64.data(), DataType::kFloat64, {10, 100}},
      TensorView{out64.data(), DataType::kFloat64, {10, 100}}, ReduceOp::kAdasum, 0.5, 4.0));
  for (herd::Handle& handle : handles) herd::wait(handle);

  const auto as_float = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  for (std::size_t t = 0; t < counts.size(); ++t) {
    check_result(rec, "float32 tensor " + std::to_string(t),
                 std::vector<double>(floats[t].begin(), floats[t].end()),
                 expected(size, static_cast<int>(t), counts[t], 1.0, as_float), 1.2e-7);
  }
  check_result(rec, "float64 out of place, prescale 0.5, postscale 4", out64,
               expected(size, 9, 1000, 2.0, [](double v) { return v; }), 2.3e-16);
  std::vector<double> input_again;
  for (int64_t i = 0; i < 1000; ++i) input_again.push_back(sample(rank, 9, i));
  rec.check(in64 == input_again, "float64 out of place", "the input changed");

  // float16.
  std::vector<float> wide;
  for (int64_t i = 0; i < 77; ++i) wide.push_back(static_cast<float>(sample(rank, 11, i)));
  std::vector<uint16_t> halves(wide.size());
  herd::float_to_float16(wide.data(), halves.data(), static_cast<int64_t>(wide.size()));
  TensorView half_view{halves.data(), DataType::kFloat16, {77}};
  herd::allreduce("adasum.f16", half_view, half_view, ReduceOp::kAdasum);
  std::vector<float> back(halves.size());
  herd::float16_to_float(halves.data(), back.data(), static_cast<int64_t>(halves.size()));
  const auto as_half = [](double v) {
    const float f = static_cast<float>(v);
    uint16_t bits = 0;
    herd::float_to_float16(&f, &bits, 1);
    float out = 0;
    herd::float16_to_float(&bits, &out, 1);
    return static_cast<double>(out);
  };
  check_result(rec, "float16", std::vector<double>(back.begin(), back.end()),
               expected(size, 11, 77, 1.0, as_half), 9.8e-4);

  // A grouped allreduce: one unit, each member its own coefficients.
  std::vector<double> g0, g1;
  for (int64_t i = 0; i < 6; ++i) g0.push_back(sample(rank, 12, i));
  for (int64_t i = 0; i < 40; ++i) g1.push_back(sample(rank, 13, i));
  TensorView v0{g0.data(), DataType::kFloat64, {6}};
  TensorView v1{g1.data(), DataType::kFloat64, {4, 10}};
  herd::grouped_allreduce({"adasum.g0", "adasum.g1"}, {v0, v1}, {v0, v1}, ReduceOp::kAdasum);
  const auto same = [](double v) { return v; };
  check_result(rec, "grouped member 0", g0, expected(size, 12, 6, 1.0, same), 2.3e-16);
  check_result(rec, "grouped member 1", g1, expected(size, 13, 40, 1.0, same), 2.3e-16);
}

// Records a pass when `call` throws herd::Error of `kind` whose message holds
// every one of `parts`.
void expect_refusal(Recorder& rec, const std::string& name, ErrorKind kind,
                    const std::vector<std::string>& parts, const std::function<void()>& call) {
  try {
    call();
    rec.fail(name, "no exception");
  } catch (const herd::Error& e) {
    const std::string message = e.what();
    bool ok = e.kind() == kind;
    for (const std::string& part : parts) ok = ok && message.find(part) != std::string::npos;
    rec.check(ok, name, "kind " + std::to_string(static_cast<int>(e.kind())) + ": " + message);
  }
}

void test_refusals(Recorder& rec, int rank, int size) {
  std::vector<int32_t> ints(4, 1);
  TensorView int_view{ints.data(), DataType::kInt32, {4}};
  expect_refusal(rec, "int32", ErrorKind::kInvalidArgument,
                 {"allreduce 'adasum.int'", "Adasum reduces float16, float32 and float64", "int32"},
                 [&] { herd::allreduce("adasum.int", int_view, int_view, ReduceOp::kAdasum); });
  std::vector<uint16_t> bf(4, 0);
  TensorView bf_view{bf.data(), DataType::kBFloat16, {4}};
  expect_refusal(rec, "bfloat16", ErrorKind::kInvalidArgument, {"not bfloat16"}, [&] {
    herd::grouped_allreduce({"adasum.bf"}, {bf_view}, {bf_view}, ReduceOp::kAdasum);
  });
  std::vector<float> rows(static_cast<std::size_t>(2 * size), 1.0f);
  TensorView rows_view{rows.data(), DataType::kFloat32, {2 * size}};
  herd::Tensor shard;
  expect_refusal(rec, "reducescatter", ErrorKind::kNotImplemented,
                 {"reducescatter 'adasum.rs'", "does not take Adasum"},
                 [&] { herd::reducescatter("adasum.rs", rows_view, &shard, ReduceOp::kAdasum); });
  if (!power_of_two(size)) {
    const std::string has = "process set 0 has " + std::to_string(size) + " ranks";
    expect_refusal(rec, "set size", ErrorKind::kNotImplemented,
                   {"allreduce 'adasum.odd'", "power of two", has},
                   [&] { herd::allreduce("adasum.odd", rows_view, rows_view, ReduceOp::kAdasum); });
    expect_refusal(
        rec, "set size, grouped", ErrorKind::kNotImplemented, {"power of two", has}, [&] {
          herd::grouped_allreduce({"adasum.odd.g"}, {rows_view}, {rows_view}, ReduceOp::kAdasum);
        });
  }
  // Nothing was submitted: the same names, and the job, still work.
  std::vector<float> mine(3, static_cast<float>(rank + 1));
  TensorView mine_view{mine.data(), DataType::kFloat32, {3}};
  herd::allreduce("adasum.odd", mine_view, mine_view, ReduceOp::kSum);
  CaseCheck c(rec, "sum after the refusals");
  const float total = static_cast<float>(size * (size + 1) / 2);
  for (int i = 0; i < 3; ++i) {
    if (mine[static_cast<std::size_t>(i)] != total) {
      c.mismatch(i, std::to_string(total), std::to_string(mine[static_cast<std::size_t>(i)]));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_adasum", world.rank);
  try {
    herd::init();
    if (power_of_two(world.size)) test_results(rec, world.rank, world.size);
    test_refusals(rec, world.rank, world.size);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
