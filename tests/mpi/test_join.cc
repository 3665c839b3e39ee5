// Multi-rank test of herd::join: ranks that run out of data join, and the
// others' allreduces go on without them.
//
// Round 1: rank r runs 3 + r steps, each a batch of allreduces submitted
// together (sum, average, min, max, product on float32 and int32, averages of
// int64 and of negative int32 and int64 sums, a product with prescale 2, and
// a grouped sum), then joins. At step s the active ranks are those with
// r >= s - 2: a rank that finished never submits the step's names, so they
// complete only once it has joined, and every expected value is folded here
// over the active ranks alone (joined ranks add the identity and are not
// prescaled), except that an average divides by every rank of the job,
// joined ones included: int32 5 + 5 over 3 ranks with one joined gives 3,
// -7 + -7 gives -4, and float32 sums are multiplied by 1/p in float32.
// Every value is compared exactly. The highest rank runs
// the most steps and sleeps 50 ms before joining, so join returns p - 1 on
// every rank. At step 3 the active ranks also submit an allgather, which must
// fail with a message about joined ranks.
// Round 2: ranks 1..p-1 join at once while rank 0 runs 5 more steps alone and
// then tries allgather, broadcast, alltoall, reducescatter and barrier (each
// must fail naming joined ranks); join returns 0 everywhere. After each round
// ordinary allreduces and an allgather over all ranks work again, and at the
// end a barrier over all ranks completes. Run by ctest under mpiexec at 1..4
// ranks.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using herd::TensorView;
using namespace herd_test;

struct Job {
  Recorder& rec;
  int rank;
  int size;
};

constexpr int64_t kCount = 5;

// Rank r's element k at step s, by input kind.
double v_input(int r, int s, int k) { return r + 1 + 10 * s + k; }
double w_input(int r, int s, int k) { return (r * 7 + s * 3 + k) % 11 - 5; }
double u_input(int r, int s, int k) {
  return ((r + s + k) % 3 == 0 ? 2 : 1) * ((r + k) % 2 ? -1 : 1);
}

struct OpCase {
  const char* name;
  DataType dtype;
  ReduceOp op;
  double prescale;
  double (*input)(int, int, int);
};

const OpCase kOps[] = {
    {"j/sum_f32", DataType::kFloat32, ReduceOp::kSum, 1.0, v_input},
    {"j/sum_i32", DataType::kInt32, ReduceOp::kSum, 1.0, v_input},
    {"j/avg_f32", DataType::kFloat32, ReduceOp::kAverage, 1.0, v_input},
    {"j/avg_i32", DataType::kInt32, ReduceOp::kAverage, 1.0, v_input},
    {"j/avg_i64", DataType::kInt64, ReduceOp::kAverage, 1.0, v_input},
    {"j/avg_i32_signs", DataType::kInt32, ReduceOp::kAverage, 1.0, w_input},
    {"j/avg_i64_signs", DataType::kInt64, ReduceOp::kAverage, 1.0, w_input},
    {"j/avg_f32_signs", DataType::kFloat32, ReduceOp::kAverage, 1.0, w_input},
    {"j/min_f32", DataType::kFloat32, ReduceOp::kMin, 1.0, w_input},
    {"j/min_i32", DataType::kInt32, ReduceOp::kMin, 1.0, w_input},
    {"j/max_f32", DataType::kFloat32, ReduceOp::kMax, 1.0, w_input},
    {"j/max_i32", DataType::kInt32, ReduceOp::kMax, 1.0, w_input},
    {"j/prod_f32", DataType::kFloat32, ReduceOp::kProduct, 1.0, u_input},
    {"j/prod_i32", DataType::kInt32, ReduceOp::kProduct, 1.0, u_input},
    {"j/prod_pre2", DataType::kFloat32, ReduceOp::kProduct, 2.0, u_input},
};

// The reduction over `active` of op.input at step s, element k, on a job of
// `size` ranks (an average's divisor).
double expected_value(const OpCase& op, const std::vector<int>& active, int size, int s, int k) {
  double acc = 0;
  bool first = true;
  for (int r : active) {
    const double x = op.input(r, s, k) * op.prescale;
    if (first) {
      acc = x;
    } else if (op.op == ReduceOp::kSum || op.op == ReduceOp::kAverage) {
      acc += x;
    } else if (op.op == ReduceOp::kMin) {
      acc = std::min(acc, x);
    } else if (op.op == ReduceOp::kMax) {
      acc = std::max(acc, x);
    } else {
      acc *= x;
    }
    first = false;
  }
  if (op.op == ReduceOp::kAverage) {
    if (is_integer(op.dtype)) {
      // C++ integer division truncates toward zero.
      return static_cast<double>(static_cast<int64_t>(acc) / size);
    }
    // The float32 sum is exact (small integers); the average multiplies it
    // by 1/p rounded to float32, and rounds the product to float32.
    return static_cast<double>(static_cast<float>(acc) * static_cast<float>(1.0 / size));
  }
  return acc;
}

void expect_joined_error(const Job& job, const std::string& case_name, const std::string& name,
                         const std::function<void()>& run) {
  const std::string what = error_of(run);
  job.rec.check(
      what.find("joined") != std::string::npos && what.find(name) != std::string::npos, case_name,
      "expected a herd::Error about joined ranks naming '" + name + "', got \"" + what + "\"");
}

// One step of this rank: every op of kOps and a grouped sum, submitted
// together, checked against the reduction over `active`.
void step(const Job& job, const std::string& round, int s, const std::vector<int>& active) {
  const std::string case_name = round + " step " + std::to_string(s);
  CaseCheck c(job.rec, case_name);
  constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);
  std::vector<std::vector<uint64_t>> buffers;
  std::vector<herd::Handle> handles;
  std::vector<float> group_a(3);
  std::vector<float> group_b(2);
  for (int k = 0; k < 3; ++k) group_a[k] = static_cast<float>(v_input(job.rank, s, k));
  for (int k = 0; k < 2; ++k) group_b[k] = static_cast<float>(v_input(job.rank, s, 10 + k));
  const std::string error = error_of([&] {
    for (const OpCase& op : kOps) {
      buffers.push_back(storage_for(op.dtype, kCount));
      for (int k = 0; k < kCount; ++k)
        store_value(op.dtype, buffers.back().data(), k, op.input(job.rank, s, k));
      const TensorView view{buffers.back().data(), op.dtype, {kCount}};
      handles.push_back(herd::allreduce_async(op.name, view, view, op.op, op.prescale, 1.0));
    }
    const std::vector<TensorView> group = {{group_a.data(), DataType::kFloat32, {3}},
                                           {group_b.data(), DataType::kFloat32, {2}}};
    handles.push_back(
        herd::grouped_allreduce_async({"j/gA", "j/gB"}, group, group, ReduceOp::kSum));
    for (const herd::Handle& handle : handles) herd::wait(handle);
  });
  if (error != "(no error)") return c.fail("threw: " + error);
  for (int o = 0; o < kNumOps; ++o) {
    const OpCase& op = kOps[o];
    for (int k = 0; k < kCount; ++k) {
      const double expected = expected_value(op, active, job.size, s, k);
      const double actual = load_value(op.dtype, buffers[o].data(), k);
      if (actual != expected) {
        c.mismatch(o * kCount + k, std::string(op.name) + " " + double_string(expected),
                   double_string(actual));
      }
    }
  }
  const OpCase sum{"", DataType::kFloat32, ReduceOp::kSum, 1.0, v_input};
  for (int k = 0; k < 5; ++k) {
    const double expected = expected_value(sum, active, job.size, s, k < 3 ? k : 10 + k - 3);
    const double actual = k < 3 ? group_a[k] : group_b[k - 3];
    if (actual != expected)
      c.mismatch(100 + k, "group " + double_string(expected), double_string(actual));
  }
}

void check_join(const Job& job, const std::string& case_name, int expected) {
  int last = -1;
  const std::string error = error_of([&] { last = herd::join(); });
  if (error != "(no error)") return job.rec.fail(case_name, "join threw: " + error);
  job.rec.check(last == expected, case_name,
                "join returned " + std::to_string(last) + ", expected " + std::to_string(expected));
}

// Every rank: a sum over all ranks and an allgather of one row each.
void everyone_works(const Job& job, const std::string& when) {
  CaseCheck c(job.rec, when + ": collectives over every rank");
  std::vector<float> x(3);
  for (int k = 0; k < 3; ++k) x[k] = static_cast<float>((job.rank + 1) * (k + 1));
  float row = static_cast<float>(job.rank);
  herd::Tensor out;
  const std::string error = error_of([&] {
    herd::allreduce("j/after", {x.data(), DataType::kFloat32, {3}},
                    {x.data(), DataType::kFloat32, {3}}, ReduceOp::kSum);
    herd::allgather("j/after_gather", {&row, DataType::kFloat32, {1}}, &out);
  });
  if (error != "(no error)") return c.fail("threw: " + error);
  const double s1 = job.size * (job.size + 1) / 2.0;
  for (int k = 0; k < 3; ++k) {
    if (x[k] != s1 * (k + 1)) c.mismatch(k, double_string(s1 * (k + 1)), double_string(x[k]));
  }
  if (out.num_elements() != job.size) return c.fail("allgather gave " + shape_string(out.shape()));
  for (int r = 0; r < job.size; ++r) {
    if (out.data_as<float>()[r] != r) c.mismatch(10 + r, std::to_string(r), "other");
  }
}

// Rank r runs 3 + r steps; the last rank joins last.
void round_one(const Job& job) {
  const int steps = 3 + job.rank;
  for (int s = 0; s < steps; ++s) {
    std::vector<int> active;
    for (int r = 0; r < job.size; ++r) {
      if (r >= s - 2) active.push_back(r);
    }
    step(job, "round 1", s, active);
    if (s == 3) {  // rank 0 has run out of steps: nothing but allreduce runs
      float x[2] = {1.0f, 2.0f};
      herd::Tensor out;
      expect_joined_error(job, "round 1 allgather while rank 0 is joined", "j/gather", [&] {
        herd::allgather("j/gather", {x, DataType::kFloat32, {2}}, &out);
      });
    }
  }
  if (job.rank == job.size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  check_join(job, "round 1 join", job.size - 1);
}

// Ranks 1..p-1 join at once; rank 0 runs alone, then joins last.
void round_two(const Job& job) {
  if (job.rank != 0) return check_join(job, "round 2 join", 0);
  for (int s = 0; s < 5; ++s) step(job, "round 2", 100 + s, {0});
  if (job.size > 1) {
    std::vector<float> data(4 * job.size, 1.0f);
    const TensorView v{data.data(), DataType::kFloat32, {job.size, 4}};
    herd::Tensor out;
    expect_joined_error(job, "round 2 allgather", "j/x", [&] { herd::allgather("j/x", v, &out); });
    expect_joined_error(job, "round 2 broadcast", "j/x", [&] { herd::broadcast("j/x", v, 0); });
    expect_joined_error(job, "round 2 alltoall", "j/x",
                        [&] { herd::alltoall("j/x", v, {}, &out); });
    expect_joined_error(job, "round 2 reducescatter", "j/x",
                        [&] { herd::reducescatter("j/x", v, &out, ReduceOp::kSum); });
    expect_joined_error(job, "round 2 barrier", "barrier", [] { herd::barrier(); });
  }
  check_join(job, "round 2 join", 0);
}

// A barrier over every rank must complete; it runs on a thread so that a
// hang (ranks numbering their barriers differently after the failed one in
// round 2) fails the case instead of the whole job. Returns the thread,
// joined by the caller after herd::shutdown releases a stuck barrier.
std::thread final_barrier(const Job& job, std::atomic<bool>* done) {
  std::thread thread([done] {
    try {
      herd::barrier();
    } catch (const herd::Error&) {
    }
    done->store(true);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done->load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  job.rec.check(done->load(), "barrier over every rank after the rounds",
                "still waiting after 20 s");
  return thread;
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_join", world.rank);
  const Job job{rec, world.rank, world.size};
  std::atomic<bool> barrier_done{false};
  std::thread barrier_thread;
  try {
    herd::init();
    round_one(job);
    everyone_works(job, "after round 1");
    round_two(job);
    everyone_works(job, "after round 2");
    barrier_thread = final_barrier(job, &barrier_done);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  shutdown_herd(rec);
  if (barrier_thread.joinable()) barrier_thread.join();
  MPI_Finalize();
  return code;
}
