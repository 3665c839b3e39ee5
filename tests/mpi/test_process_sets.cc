// Multi-rank test of process sets: herd::add_process_set, remove_process_set,
// global_process_set and every collective run on a set.
//
// The job splits into the even ranks and the odd ranks (with HERD_PROCESS_SETS
// =0,2;1,3 at 4 ranks those are made at init as sets 1 and 2; otherwise this
// test adds them, passing the ranks in descending order). Every rank runs
// allreduce (sum, max, average), allgather (one member gathers 0 rows),
// broadcast from the first and last member (roots are global ranks), alltoall
// (some blocks empty), reducescatter, grouped allreduce and barrier on its set,
// twice (the second time through the response cache), the two sets at once and
// under the same names; expected values are folded here over the members.
// Independence: odd ranks sleep 300 ms and then submit nothing until rank 0
// tells them (MPI, outside herd) that the even set finished 20 allreduces.
// Errors: a disagreement inside a set names global ranks; a rank outside a set,
// a removed or unknown set, and every bad add_process_set fail with their
// messages; removing a set fails the operation pending on it; ids count up and
// are never reused. Run by ctest under mpiexec at 1..4 ranks.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ProcessSet;
using herd::ReduceOp;
using herd::TensorView;
using namespace herd_test;
using Shape = std::vector<int64_t>;

struct Job {
  Recorder& rec;
  int rank;
  int size;
};

std::string list(const std::vector<int>& ranks) {
  std::string text = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? "," : "") + std::to_string(ranks[i]);
  return text + "]";
}

// what() of the herd::Error `run` throws; "(no error)" when it returns.
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

void expect_error(const Job& job, const std::string& case_name, const std::function<void()>& run,
                  const std::string& expected) {
  const std::string actual = error_of(run);
  job.rec.check(actual == expected, case_name,
                "expected \"" + expected + "\", actual \"" + actual + "\"");
}

void expect_error_parts(const Job& job, const std::string& case_name,
                        const std::function<void()>& run, const std::vector<std::string>& parts) {
  const std::string actual = error_of(run);
  for (const std::string& part : parts) {
    job.rec.check(actual.find(part) != std::string::npos && actual != "(no error)", case_name,
                  "message \"" + actual + "\" lacks \"" + part + "\"");
  }
}

// Runs `run` inside a case; a thrown error fails it.
void guarded(CaseCheck& c, const std::function<void()>& run) {
  const std::string error = error_of(run);
  if (error != "(no error)") c.fail("threw: " + error);
}

int position(const std::vector<int>& members, int rank) {
  return static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
}

double sum_plus_one(const std::vector<int>& members) {
  double s = 0;
  for (int g : members) s += g + 1;
  return s;
}

void compare(CaseCheck& c, int64_t count, const std::function<double(int64_t)>& expected,
             const std::function<double(int64_t)>& actual, double tolerance = 0) {
  for (int64_t k = 0; k < count; ++k) {
    if (std::fabs(actual(k) - expected(k)) > tolerance)
      c.mismatch(k, double_string(expected(k)), double_string(actual(k)));
  }
}

// --- collectives on a set, expected values over its members ------------------

void set_collectives(const Job& job, const ProcessSet& set, const std::string& when) {
  const std::vector<int>& m = set.ranks();
  const int g = job.rank;
  const int i = position(m, g);
  const int p = static_cast<int>(m.size());
  const double s1 = sum_plus_one(m);
  const std::string tag = when + " set " + std::to_string(set.id());
  {
    CaseCheck c(job.rec, tag + " allreduce");
    std::vector<float> sum(5);
    std::vector<int32_t> max(5);
    std::vector<double> avg(5);
    for (int k = 0; k < 5; ++k) {
      sum[k] = static_cast<float>((g + 1) * (k + 1));
      max[k] = 7 * g - k;
      avg[k] = (g + 1) * (k + 1);
    }
    guarded(c, [&] {
      herd::Handle a = herd::allreduce_async("ps/sum", {sum.data(), DataType::kFloat32, {5}},
                                             {sum.data(), DataType::kFloat32, {5}}, ReduceOp::kSum,
                                             1.0, 1.0, set);
      herd::Handle b = herd::allreduce_async("ps/max", {max.data(), DataType::kInt32, {5}},
                                             {max.data(), DataType::kInt32, {5}}, ReduceOp::kMax,
                                             1.0, 1.0, set);
      herd::allreduce("ps/avg", {avg.data(), DataType::kFloat64, {5}},
                      {avg.data(), DataType::kFloat64, {5}}, ReduceOp::kAverage, 1.0, 1.0, set);
      herd::wait(a);
      herd::wait(b);
    });
    compare(c, 5, [&](int64_t k) { return s1 * (k + 1); }, [&](int64_t k) { return sum[k]; });
    compare(c, 5, [&](int64_t k) { return 7.0 * m.back() - k; }, [&](int64_t k) { return max[k]; });
    compare(
        c, 5, [&](int64_t k) { return s1 * (k + 1) / p; }, [&](int64_t k) { return avg[k]; },
        1e-12 * s1 * 5);
  }
  {  // Rank g gathers (g + 1) % 3 rows of [*, 2]: 100 g + j.
    CaseCheck c(job.rec, tag + " allgather");
    const int64_t rows = (g + 1) % 3;
    std::vector<float> input(2 * rows + 1);
    for (int64_t j = 0; j < 2 * rows; ++j) input[j] = static_cast<float>(100 * g + j);
    herd::Tensor out;
    guarded(c, [&] { herd::allgather("ps/gather", {input.data(), DataType::kFloat32, {rows, 2}},
                                     &out, set); });
    std::vector<double> expected;
    for (int s : m) {
      for (int64_t j = 0; j < 2 * ((s + 1) % 3); ++j) expected.push_back(100.0 * s + j);
    }
    const Shape shape{static_cast<int64_t>(expected.size() / 2), 2};
    if (c.ok() && out.shape() != shape) c.fail("shape " + shape_string(out.shape()));
    if (c.ok()) {
      compare(c, static_cast<int64_t>(expected.size()), [&](int64_t k) { return expected[k]; },
              [&](int64_t k) { return out.data_as<float>()[k]; });
    }
  }
  for (int root : {m.front(), m.back()}) {
    CaseCheck c(job.rec, tag + " broadcast root " + std::to_string(root));
    std::vector<float> data(4, -1.0f);
    for (int k = 0; k < 4 && g == root; ++k) data[k] = 10.0f * root + k + 0.5f;
    guarded(c, [&] {
      herd::broadcast("ps/bcast" + std::to_string(root == m.front()),
                      {data.data(), DataType::kFloat32, {4}}, root, set);
    });
    compare(c, 4, [&](int64_t k) { return 10.0 * root + k + 0.5; },
            [&](int64_t k) { return data[k]; });
  }
  {  // Sender s sends (s + j) % 3 rows to member j: 1000 s + 100 j + 10 t + col.
    CaseCheck c(job.rec, tag + " alltoall");
    std::vector<int64_t> splits;
    std::vector<float> input(1);
    for (int j = 0; j < p; ++j) {
      splits.push_back((g + j) % 3);
      for (int t = 0; t < splits.back(); ++t) {
        for (int col = 0; col < 2; ++col) input.push_back(1000.0f * g + 100 * j + 10 * t + col);
      }
    }
    const int64_t rows = static_cast<int64_t>(input.size() / 2);
    herd::Tensor out;
    std::vector<int64_t> received;
    guarded(c, [&] {
      herd::alltoall("ps/a2a", {input.data() + 1, DataType::kFloat32, {rows, 2}}, splits, &out,
                     &received, set);
    });
    std::vector<int64_t> expected_splits;
    std::vector<double> expected;
    for (int s : m) {
      expected_splits.push_back((s + i) % 3);
      for (int t = 0; t < (s + i) % 3; ++t) {
        for (int col = 0; col < 2; ++col) expected.push_back(1000.0 * s + 100 * i + 10 * t + col);
      }
    }
    if (c.ok() && received != expected_splits) c.fail("received " + shape_string(received));
    const Shape shape{static_cast<int64_t>(expected.size() / 2), 2};
    if (c.ok() && out.shape() != shape) c.fail("shape " + shape_string(out.shape()));
    if (c.ok()) {
      compare(c, static_cast<int64_t>(expected.size()), [&](int64_t k) { return expected[k]; },
              [&](int64_t k) { return out.data_as<float>()[k]; });
    }
  }
  {  // [2p+1, 2] of (g + 1)(k + 1); member i keeps its block of rows.
    CaseCheck c(job.rec, tag + " reducescatter");
    const int64_t r = 2 * p + 1;
    std::vector<float> input(2 * r);
    for (int64_t k = 0; k < 2 * r; ++k) input[k] = static_cast<float>((g + 1) * (k + 1));
    herd::Tensor out;
    guarded(c, [&] { herd::reducescatter("ps/rs", {input.data(), DataType::kFloat32, {r, 2}}, &out,
                                         ReduceOp::kSum, 1.0, 1.0, set); });
    const int64_t rows = r / p + (i < r % p ? 1 : 0);
    const int64_t first = i * (r / p) + std::min<int64_t>(i, r % p);
    if (c.ok() && out.shape() != Shape{rows, 2}) c.fail("shape " + shape_string(out.shape()));
    if (c.ok()) {
      compare(c, 2 * rows, [&](int64_t k) { return s1 * (2 * first + k + 1); },
              [&](int64_t k) { return out.data_as<float>()[k]; });
    }
  }
  {
    CaseCheck c(job.rec, tag + " grouped allreduce");
    std::vector<float> a(3);
    std::vector<float> b(4);
    for (int k = 0; k < 3; ++k) a[k] = static_cast<float>((g + 1) * (k + 1));
    for (int k = 0; k < 4; ++k) b[k] = static_cast<float>((g + 1) * (k + 10));
    const std::vector<TensorView> views = {{a.data(), DataType::kFloat32, {3}},
                                           {b.data(), DataType::kFloat32, {2, 2}}};
    guarded(c, [&] {
      herd::grouped_allreduce({"ps/gA", "ps/gB"}, views, views, ReduceOp::kSum, 1.0, 1.0, set);
    });
    compare(c, 3, [&](int64_t k) { return s1 * (k + 1); }, [&](int64_t k) { return a[k]; });
    compare(c, 4, [&](int64_t k) { return s1 * (k + 10); }, [&](int64_t k) { return b[k]; });
  }
  {
    CaseCheck c(job.rec, tag + " barrier");
    guarded(c, [&] { herd::barrier(set); });
  }
}

// The global set and this rank's set at once, under the same name.
void global_and_set(const Job& job, const ProcessSet& set) {
  CaseCheck c(job.rec, "global and set " + std::to_string(set.id()) + " at once");
  const ProcessSet global = herd::global_process_set();
  if (!global.is_global() || global.id() != 0 || !global.ranks().empty()) c.fail("global set");
  float in_set = job.rank + 1.0f;
  float in_all = job.rank + 1.0f;
  guarded(c, [&] {
    herd::Handle a = herd::allreduce_async("both", {&in_set, DataType::kFloat32, {}},
                                           {&in_set, DataType::kFloat32, {}}, ReduceOp::kSum, 1.0,
                                           1.0, set);
    herd::Handle b = herd::allreduce_async("both", {&in_all, DataType::kFloat32, {}},
                                           {&in_all, DataType::kFloat32, {}}, ReduceOp::kSum, 1.0,
                                           1.0, global);
    herd::wait(b);
    herd::wait(a);
  });
  if (in_set != sum_plus_one(set.ranks())) c.mismatch(0, "set sum", double_string(in_set));
  if (in_all != job.size * (job.size + 1) / 2.0) c.mismatch(1, "job sum", double_string(in_all));
}

// Even ranks run 20 allreduces on their set while odd ranks submit nothing
// until rank 0 (a member of the even set) says they completed.
void independence(const Job& job, const ProcessSet& even, const ProcessSet& odd) {
  constexpr int kSteps = 20;
  constexpr int kTag = 4242;
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  const bool is_even = job.rank % 2 == 0;
  const ProcessSet& mine = is_even ? even : odd;
  if (!is_even) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int done = 0;
    MPI_Request request;
    MPI_Irecv(&done, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD, &request);
    int arrived = 0;
    while (!arrived && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
      MPI_Test(&request, &arrived, MPI_STATUS_IGNORE);
      if (!arrived) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!job.rec.check(arrived && done == kSteps, "independence",
                       "the even set did not finish while the odd ranks waited 60 s")) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  }
  CaseCheck c(job.rec, std::string("independence, ") + (is_even ? "even" : "odd") + " steps");
  const double s1 = sum_plus_one(mine.ranks());
  for (int step = 0; step < kSteps && c.ok(); ++step) {
    float x = static_cast<float>((job.rank + 1) * (step + 1));
    guarded(c, [&] {
      herd::allreduce("indep", {&x, DataType::kFloat32, {}}, {&x, DataType::kFloat32, {}},
                      ReduceOp::kSum, 1.0, 1.0, mine);
    });
    if (c.ok() && x != s1 * (step + 1)) c.mismatch(step, double_string(s1 * (step + 1)),
                                                   double_string(x));
  }
  if (job.rank == 0) {
    for (int r = 1; r < job.size; r += 2) MPI_Send(&kSteps, 1, MPI_INT, r, kTag, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// --- errors --------------------------------------------------------------------

// Every member submits `name` with its own signature; wait names global ranks.
void set_mismatches(const Job& job, const ProcessSet& set) {
  const std::vector<int>& m = set.ranks();
  const int i = position(m, job.rank);
  const std::string id = " set " + std::to_string(set.id());
  std::string shapes;
  std::string roots;
  std::string trailing;
  for (std::size_t k = 0; k < m.size(); ++k) {
    const std::string at = (k ? ", rank " : "rank ") + std::to_string(m[k]) + " ";
    shapes += at + "[" + std::to_string(2 + k) + "]";
    roots += at + std::to_string(m[k]);
    trailing += at + "[1," + std::to_string(2 + k) + "]";
  }
  std::vector<float> data(8, 1.0f);
  herd::Tensor out;
  expect_error(job, "shape mismatch" + id, [&] {
    const TensorView v{data.data(), DataType::kFloat32, {2 + i}};
    herd::allreduce("mm", v, v, ReduceOp::kSum, 1.0, 1.0, set);
  }, "allreduce 'mm': shape mismatch: " + shapes);
  expect_error(job, "root mismatch" + id, [&] {
    herd::broadcast("rm", {data.data(), DataType::kFloat32, {4}}, m[i], set);
  }, "broadcast 'rm': root mismatch: " + roots);
  expect_error(job, "trailing mismatch" + id, [&] {
    herd::allgather("gm", {data.data(), DataType::kFloat32, {1, 2 + i}}, &out, set);
  }, "allgather 'gm': shape mismatch beyond the first dimension: " + trailing);
  // The names work afterwards.
  CaseCheck c(job.rec, "after mismatches" + id);
  std::vector<float> x(3, job.rank + 1.0f);
  guarded(c, [&] {
    herd::allreduce("mm", {x.data(), DataType::kFloat32, {3}}, {x.data(), DataType::kFloat32, {3}},
                    ReduceOp::kSum, 1.0, 1.0, set);
    herd::broadcast("rm", {data.data(), DataType::kFloat32, {4}}, m.back(), set);
  });
  compare(c, 3, [&](int64_t) { return sum_plus_one(m); }, [&](int64_t k) { return x[k]; });
}

// Every collective on a set this rank is not in fails at once.
void not_a_member(const Job& job, const ProcessSet& set) {
  const std::string tail = ": rank " + std::to_string(job.rank) + " is not in process set " +
                           std::to_string(set.id()) + " (ranks " + list(set.ranks()) + ")";
  std::vector<float> data(16, 1.0f);
  const TensorView v{data.data(), DataType::kFloat32, {2, 2}};
  herd::Tensor out;
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"allreduce 'nm'", [&] { herd::allreduce_async("nm", v, v, ReduceOp::kSum, 1, 1, set); }},
      {"allgather 'nm'", [&] { herd::allgather_async("nm", v, &out, set); }},
      {"broadcast 'nm'", [&] { herd::broadcast_async("nm", v, set.ranks().front(), set); }},
      {"alltoall 'nm'", [&] { herd::alltoall_async("nm", v, {}, &out, nullptr, set); }},
      {"reducescatter 'nm'",
       [&] { herd::reducescatter_async("nm", v, &out, ReduceOp::kSum, 1, 1, set); }},
      {"grouped allreduce '{nm}'",
       [&] { herd::grouped_allreduce_async({"nm"}, {v}, {v}, ReduceOp::kSum, 1, 1, set); }},
      {"barrier", [&] { herd::barrier(set); }}};
  for (const auto& [what, call] : calls) expect_error(job, "not a member: " + what, call, what + tail);
}

void add_errors(const Job& job) {
  const int n = job.size;
  const std::string add = "herd::add_process_set: ";
  expect_error_parts(job, "add empty", [] { herd::add_process_set({}); },
                     {"add_process_set", "at least one rank"});
  expect_error(job, "add duplicate", [] { herd::add_process_set({0, 0}); },
               add + "ranks [0,0] hold a duplicate");
  expect_error(job, "add out of range", [n] { herd::add_process_set({n, 0}); },
               add + "ranks [0," + std::to_string(n) + "] reach outside the job's ranks 0.." +
                   std::to_string(n - 1));
  expect_error(job, "add negative", [] { herd::add_process_set({-1}); },
               add + "ranks [-1] reach outside the job's ranks 0.." + std::to_string(n - 1));
  if (n > 1) {  // every rank's list is valid alone; they differ
    auto mine = [n](int r) { return n == 2 ? std::vector<int>{r} : std::vector<int>{0, 1 + r % 2}; };
    std::string values;
    for (int r = 0; r < n; ++r) values += (r ? ", rank " : "rank ") + std::to_string(r) + " " +
                                          list(mine(r));
    expect_error(job, "add differing", [&] { herd::add_process_set(mine(job.rank)); },
                 add + "ranks passed different arguments: " + values +
                     "; every rank must pass the same, in the same order of calls");
  }
  expect_error_parts(job, "remove global", [] { herd::remove_process_set(herd::global_process_set()); },
                     {"remove_process_set", "global"});
  expect_error_parts(job, "remove unknown", [] { herd::remove_process_set(ProcessSet(99, {0})); },
                     {"remove_process_set", "there is no process set 99"});
  expect_error(job, "use unknown", [&] {
    float x = 0;
    herd::allreduce("u", {&x, DataType::kFloat32, {}}, {&x, DataType::kFloat32, {}},
                    ReduceOp::kSum, 1, 1, ProcessSet(42, {0}));
  }, "allreduce 'u': there is no process set 42 (removed, or never added)");
}

// Removing a set fails what is pending on it; the set is then gone; its ranks
// make a new set with the next id. Returns the next id.
int removal(const Job& job, int next_id) {
  ProcessSet pair = herd::add_process_set({1, 0});
  job.rec.check(pair.id() == next_id && pair.ranks() == std::vector<int>{0, 1}, "add pair",
                "id " + std::to_string(pair.id()) + " ranks " + list(pair.ranks()));
  const int id = pair.id();
  float x = 1.0f;
  herd::Handle orphan;
  if (job.rank == 0) {  // rank 1 never submits it
    orphan = herd::allreduce_async("orphan", {&x, DataType::kFloat32, {}},
                                   {&x, DataType::kFloat32, {}}, ReduceOp::kSum, 1, 1, pair);
  }
  herd::remove_process_set(pair);
  if (job.rank == 0) {
    expect_error_parts(job, "pending on a removed set", [&] { herd::wait(orphan); },
                       {"orphan", "process set", "removed"});
    job.rec.check(herd::poll(orphan), "pending on a removed set", "poll is false after wait");
  }
  expect_error(job, "use removed", [&] {
    herd::allreduce("after", {&x, DataType::kFloat32, {}}, {&x, DataType::kFloat32, {}},
                    ReduceOp::kSum, 1, 1, pair);
  }, "allreduce 'after': there is no process set " + std::to_string(id) +
         " (removed, or never added)");
  expect_error_parts(job, "remove twice", [&] { herd::remove_process_set(pair); },
                     {"there is no process set " + std::to_string(id)});
  ProcessSet again = herd::add_process_set({0, 1});
  job.rec.check(again.id() == id + 1, "ids are not reused", "id " + std::to_string(again.id()));
  if (job.rank <= 1) {
    CaseCheck c(job.rec, "set of removed ranks again");
    guarded(c, [&] {
      x = job.rank + 1.0f;
      herd::allreduce("orphan", {&x, DataType::kFloat32, {}}, {&x, DataType::kFloat32, {}},
                      ReduceOp::kSum, 1, 1, again);
    });
    if (x != 3.0f) c.mismatch(0, "3", double_string(x));
  }
  herd::remove_process_set(again);
  return id + 2;
}

void run(const Job& job) {
  const char* env = std::getenv("HERD_PROCESS_SETS");
  const bool preset = env != nullptr && *env != '\0';
  if (preset && !job.rec.check(std::string(env) == "0,2;1,3" && job.size == 4, "preset",
                               std::string("HERD_PROCESS_SETS=") + env + " at " +
                                   std::to_string(job.size) + " ranks; expected 0,2;1,3 at 4")) {
    return;
  }
  std::vector<int> evens;
  std::vector<int> odds;
  for (int r = job.size - 1; r >= 0; --r) (r % 2 ? odds : evens).push_back(r);
  add_errors(job);
  int next_id = 1;
  ProcessSet even = preset ? ProcessSet(1, {0, 2}) : herd::add_process_set(evens);
  ProcessSet odd = preset ? ProcessSet(2, {1, 3}) : odds.empty() ? ProcessSet() : herd::add_process_set(odds);
  std::reverse(evens.begin(), evens.end());
  std::reverse(odds.begin(), odds.end());
  job.rec.check(even.id() == 1 && even.ranks() == evens, "even set",
                "id " + std::to_string(even.id()) + " ranks " + list(even.ranks()));
  next_id = 2;
  if (!odds.empty()) {
    job.rec.check(odd.id() == 2 && odd.ranks() == odds, "odd set",
                  "id " + std::to_string(odd.id()) + " ranks " + list(odd.ranks()));
    next_id = 3;
  }
  expect_error(job, "add existing", [&] { herd::add_process_set(evens); },
               "herd::add_process_set: process set 1 already has ranks " + list(evens));

  const ProcessSet& mine = job.rank % 2 ? odd : even;
  for (const char* when : {"1st", "2nd"}) set_collectives(job, mine, when);
  global_and_set(job, mine);
  if (!odds.empty()) {
    not_a_member(job, job.rank % 2 ? even : odd);
    independence(job, even, odd);
  }
  if (mine.ranks().size() > 1) set_mismatches(job, mine);
  if (job.size > 1) next_id = removal(job, next_id);
  set_collectives(job, mine, "after removal");

  herd::remove_process_set(even);
  expect_error(job, "use removed even set", [&] { herd::barrier(even); },
               "barrier: there is no process set 1 (removed, or never added)");
  ProcessSet readded = herd::add_process_set(evens);
  job.rec.check(readded.id() == next_id, "next id", "id " + std::to_string(readded.id()) +
                                                        ", expected " + std::to_string(next_id));
  if (job.rank % 2 == 0) set_collectives(job, readded, "re-added");
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Recorder rec("test_process_sets", rank);
  const Job job{rec, rank, size};
  try {
    herd::init();
    run(job);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  try {
    herd::shutdown();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "test_process_sets rank %d: shutdown threw: %s\n", rank, e.what());
  }
  MPI_Finalize();
  return code;
}
