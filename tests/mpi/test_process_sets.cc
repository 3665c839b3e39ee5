// Multi-rank test of process sets (add_process_set, remove_process_set,
// global_process_set) and of every collective run on one.
//
// The even and the odd ranks form two sets (at 4 ranks with
// HERD_PROCESS_SETS=0,2;1,3 made at init as sets 1 and 2). Each rank runs
// allreduce, allgather (some members gather 0 rows), broadcast from the first
// and last member (global roots), alltoall (some blocks empty), reducescatter,
// grouped allreduce and barrier on its set, twice (the second time through the
// response cache), both sets at once under the same names, checked against
// values folded here over the members. Independence: odd ranks sleep 300 ms,
// then submit nothing until rank 0 says (over MPI) that the even set finished
// 20 allreduces. Errors: mismatches in a set name global ranks; non-members,
// removed or unknown sets and bad add_process_set calls fail with their
// messages; removal fails what is pending; ids are never reused.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
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

// `run` must throw herd::Error: with exactly `expected`, or, when `parts` is
// given instead, a text containing every part.
void expect_error(const Job& job, const std::string& case_name, const std::string& expected,
                  const std::function<void()>& run) {
  const std::string actual = error_of(run);
  job.rec.check(actual == expected, case_name,
                "expected \"" + expected + "\", actual \"" + actual + "\"");
}

void expect_error(const Job& job, const std::string& case_name,
                  const std::vector<std::string>& parts, const std::function<void()>& run) {
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

// The sum of g + 1 over the members g: most cases reduce multiples of it.
double sum_plus_one(const std::vector<int>& m) {
  return std::accumulate(m.begin(), m.end(), 0.0) + m.size();
}

TensorView f32(float* data, Shape shape) { return {data, DataType::kFloat32, std::move(shape)}; }

// Element k of `actual` against expected[k], within `tolerance`.
template <typename T>
void compare(CaseCheck& c, const std::vector<double>& expected, const T* actual,
             double tolerance = 0) {
  for (std::size_t k = 0; k < expected.size(); ++k) {
    if (std::fabs(actual[k] - expected[k]) > tolerance)
      c.mismatch(k, double_string(expected[k]), double_string(actual[k]));
  }
}

// A float32 output herd allocated: its shape, then its elements.
void compare_tensor(CaseCheck& c, const herd::Tensor& out, const Shape& shape,
                    const std::vector<double>& expected) {
  if (!c.ok()) return;
  if (out.shape() != shape) return c.fail("output shape " + shape_string(out.shape()));
  compare(c, expected, out.data_as<float>());
}

// f(0), ..., f(n - 1).
std::vector<double> values(int64_t n, const std::function<double(int64_t)>& f) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(f(k));
  return v;
}

// --- collectives on a set, expected values over its members ------------------

void set_collectives(const Job& job, const ProcessSet& set, const std::string& when) {
  const std::vector<int>& m = set.ranks();
  const int g = job.rank;
  const int i = position(m, g);
  const int p = static_cast<int>(m.size());
  const double s1 = sum_plus_one(m);
  const std::string tag = when + " set " + std::to_string(set.id());
  {  // (g + 1)(k + 1) summed and averaged; 7 g - k maximized.
    CaseCheck c(job.rec, tag + " allreduce");
    std::vector<float> sum(5);
    std::vector<int32_t> max(5);
    std::vector<double> avg(5);
    for (int k = 0; k < 5; ++k) {
      sum[k] = static_cast<float>((g + 1) * (k + 1));
      max[k] = 7 * g - k;
      avg[k] = (g + 1) * (k + 1);
    }
    const TensorView max_view{max.data(), DataType::kInt32, {5}};
    const TensorView avg_view{avg.data(), DataType::kFloat64, {5}};
    guarded(c, [&] {
      herd::Handle a = herd::allreduce_async("ps/sum", f32(sum.data(), {5}), f32(sum.data(), {5}),
                                             ReduceOp::kSum, 1, 1, set);
      herd::Handle b =
          herd::allreduce_async("ps/max", max_view, max_view, ReduceOp::kMax, 1, 1, set);
      herd::allreduce("ps/avg", avg_view, avg_view, ReduceOp::kAverage, 1, 1, set);
      herd::wait(a);
      herd::wait(b);
    });
    compare(c, values(5, [&](int64_t k) { return s1 * (k + 1); }), sum.data());
    compare(c, values(5, [&](int64_t k) { return 7.0 * m.back() - k; }), max.data());
    compare(c, values(5, [&](int64_t k) { return s1 * (k + 1) / p; }), avg.data(), 1e-12 * s1 * 5);
  }
  {  // Rank g gathers (g + 1) % 3 rows of [*, 2]: 100 g + j.
    CaseCheck c(job.rec, tag + " allgather");
    const int64_t rows = (g + 1) % 3;
    std::vector<float> input(2 * rows + 1);
    for (int64_t j = 0; j < 2 * rows; ++j) input[j] = static_cast<float>(100 * g + j);
    herd::Tensor out;
    guarded(c, [&] { herd::allgather("ps/gather", f32(input.data(), {rows, 2}), &out, set); });
    std::vector<double> expected;
    for (int s : m) {
      for (int64_t j = 0; j < 2 * ((s + 1) % 3); ++j) expected.push_back(100.0 * s + j);
    }
    compare_tensor(c, out, {static_cast<int64_t>(expected.size() / 2), 2}, expected);
  }
  for (int root : {m.front(), m.back()}) {
    CaseCheck c(job.rec, tag + " broadcast root " + std::to_string(root));
    std::vector<float> data(4, -1.0f);
    for (int k = 0; k < 4 && g == root; ++k) data[k] = 10.0f * root + k + 0.5f;
    const std::string name = root == m.front() ? "ps/bcast_first" : "ps/bcast_last";
    guarded(c, [&] { herd::broadcast(name, f32(data.data(), {4}), root, set); });
    compare(c, values(4, [&](int64_t k) { return 10.0 * root + k + 0.5; }), data.data());
  }
  {  // Sender s sends (s + j) % 3 rows to member j: 1000 s + 100 j + 10 t + col.
    CaseCheck c(job.rec, tag + " alltoall");
    std::vector<int64_t> splits;
    std::vector<float> input(1);  // input[0] unused: data is never null
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
      herd::alltoall("ps/a2a", f32(input.data() + 1, {rows, 2}), splits, &out, &received, set);
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
    compare_tensor(c, out, {static_cast<int64_t>(expected.size() / 2), 2}, expected);
  }
  {  // [2p+1, 2] of (g + 1)(k + 1); member i keeps its block of rows.
    CaseCheck c(job.rec, tag + " reducescatter");
    const int64_t r = 2 * p + 1;
    std::vector<float> input(2 * r);
    for (int64_t k = 0; k < 2 * r; ++k) input[k] = static_cast<float>((g + 1) * (k + 1));
    herd::Tensor out;
    guarded(c, [&] {
      herd::reducescatter("ps/rs", f32(input.data(), {r, 2}), &out, ReduceOp::kSum, 1, 1, set);
    });
    const int64_t rows = r / p + (i < r % p ? 1 : 0);
    const int64_t first = i * (r / p) + std::min<int64_t>(i, r % p);
    compare_tensor(c, out, {rows, 2},
                   values(2 * rows, [&](int64_t k) { return s1 * (2 * first + k + 1); }));
  }
  {
    CaseCheck c(job.rec, tag + " grouped allreduce");
    std::vector<float> a(3);
    std::vector<float> b(4);
    for (int k = 0; k < 3; ++k) a[k] = static_cast<float>((g + 1) * (k + 1));
    for (int k = 0; k < 4; ++k) b[k] = static_cast<float>((g + 1) * (k + 10));
    const std::vector<TensorView> views = {f32(a.data(), {3}), f32(b.data(), {2, 2})};
    guarded(c, [&] {
      herd::grouped_allreduce({"ps/gA", "ps/gB"}, views, views, ReduceOp::kSum, 1, 1, set);
    });
    compare(c, values(3, [&](int64_t k) { return s1 * (k + 1); }), a.data());
    compare(c, values(4, [&](int64_t k) { return s1 * (k + 10); }), b.data());
  }
  CaseCheck c(job.rec, tag + " barrier");
  guarded(c, [&] { herd::barrier(set); });
}

// The global set and this rank's set at once, under the same name.
void global_and_set(const Job& job, const ProcessSet& set) {
  CaseCheck c(job.rec, "global and set " + std::to_string(set.id()) + " at once");
  const ProcessSet global = herd::global_process_set();
  if (!global.is_global() || global.id() != 0 || !global.ranks().empty()) c.fail("global set");
  float in_set = job.rank + 1.0f;
  float in_all = job.rank + 1.0f;
  guarded(c, [&] {
    herd::Handle a = herd::allreduce_async("both", f32(&in_set, {}), f32(&in_set, {}),
                                           ReduceOp::kSum, 1.0, 1.0, set);
    herd::Handle b = herd::allreduce_async("both", f32(&in_all, {}), f32(&in_all, {}),
                                           ReduceOp::kSum, 1.0, 1.0, global);
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
  const bool is_even = job.rank % 2 == 0;
  const ProcessSet& mine = is_even ? even : odd;
  if (!is_even) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int done = 0;
    MPI_Request request;
    MPI_Irecv(nullptr, 0, MPI_INT, 0, kTag, MPI_COMM_WORLD, &request);
    for (int waited_ms = 0; !done && waited_ms < 60000; waited_ms += 5) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!done) {  // the even set waits on the odd ranks: this job cannot end
      job.rec.fail("independence", "the even set did not finish while the odd ranks waited 60 s");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  CaseCheck c(job.rec, std::string("independence, ") + (is_even ? "even" : "odd") + " steps");
  const double s1 = sum_plus_one(mine.ranks());
  for (int step = 0; step < kSteps && c.ok(); ++step) {
    float x = static_cast<float>((job.rank + 1) * (step + 1));
    guarded(c, [&] {
      herd::allreduce("indep", f32(&x, {}), f32(&x, {}), ReduceOp::kSum, 1.0, 1.0, mine);
    });
    if (c.ok() && x != s1 * (step + 1))
      c.mismatch(step, double_string(s1 * (step + 1)), double_string(x));
  }
  if (job.rank == 0) {
    for (int r = 1; r < job.size; r += 2) MPI_Send(nullptr, 0, MPI_INT, r, kTag, MPI_COMM_WORLD);
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
  const TensorView v = f32(data.data(), {2 + i});
  herd::Tensor out;
  expect_error(job, "shape mismatch" + id, "allreduce 'mm': shape mismatch: " + shapes,
               [&] { herd::allreduce("mm", v, v, ReduceOp::kSum, 1, 1, set); });
  expect_error(job, "root mismatch" + id, "broadcast 'rm': root mismatch: " + roots,
               [&] { herd::broadcast("rm", f32(data.data(), {4}), m[i], set); });
  expect_error(job, "trailing mismatch" + id,
               "allgather 'gm': shape mismatch beyond the first dimension: " + trailing, [&] {
                 herd::allgather("gm", f32(data.data(), {1, 2 + i}), &out, set);
               });
  // The names work afterwards.
  CaseCheck c(job.rec, "after mismatches" + id);
  std::vector<float> x(3, job.rank + 1.0f);
  guarded(c, [&] {
    herd::allreduce("mm", f32(x.data(), {3}), f32(x.data(), {3}), ReduceOp::kSum, 1, 1, set);
    herd::broadcast("rm", f32(data.data(), {4}), m.back(), set);
  });
  compare(c, std::vector<double>(3, sum_plus_one(m)), x.data());
}

// Every collective on a set this rank is not in fails at once.
void not_a_member(const Job& job, const ProcessSet& set) {
  const std::string tail = ": rank " + std::to_string(job.rank) + " is not in process set " +
                           std::to_string(set.id()) + " (ranks " + list(set.ranks()) + ")";
  std::vector<float> data(16, 1.0f);
  const TensorView v = f32(data.data(), {2, 2});
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
  for (const auto& [what, call] : calls) expect_error(job, "not a member", what + tail, call);
}

// Each fails on every rank; the failed adds take no id.
void add_errors(const Job& job) {
  const int n = job.size;
  const std::string add = "herd::add_process_set: ";
  const std::string outside = " reach outside the job's ranks 0.." + std::to_string(n - 1);
  expect_error(job, "add empty", std::vector<std::string>{"add_process_set", "at least one rank"},
               [] { herd::add_process_set({}); });
  expect_error(job, "add duplicate", add + "ranks [0,0] hold a duplicate", [] {
    herd::add_process_set({0, 0});
  });
  expect_error(job, "add out of range", add + "ranks [0," + std::to_string(n) + "]" + outside, [n] {
    herd::add_process_set({n, 0});
  });
  expect_error(job, "add negative", add + "ranks [-1]" + outside,
               [] { herd::add_process_set({-1}); });
  if (n > 1) {  // every rank's list is valid alone; they differ
    auto mine = [n](int r) {
      return n == 2 ? std::vector<int>{r} : std::vector<int>{0, 1 + r % 2};
    };
    std::string values;
    for (int r = 0; r < n; ++r)
      values += (r ? ", rank " : "rank ") + std::to_string(r) + " " + list(mine(r));
    expect_error(job, "add differing",
                 add + "ranks passed different arguments: " + values +
                     "; every rank must pass the same, in the same order of calls",
                 [&] { herd::add_process_set(mine(job.rank)); });
  }
  expect_error(job, "remove global", std::vector<std::string>{"remove_process_set", "global"},
               [] { herd::remove_process_set(herd::global_process_set()); });
  expect_error(job, "remove unknown", std::vector<std::string>{"there is no process set 99"},
               [] { herd::remove_process_set(ProcessSet(99, {0})); });
  float x = 0;
  expect_error(job, "use unknown",
               "allreduce 'u': there is no process set 42 (removed, or never added)", [&] {
                 herd::allreduce("u", f32(&x, {}), f32(&x, {}), ReduceOp::kSum, 1, 1,
                                 ProcessSet(42, {0}));
               });
}

// Removing a set fails what is pending on it; the set is then gone, and its
// ranks make a new set with the next id. Returns the id after that.
int removal(const Job& job, int next_id) {
  ProcessSet pair = herd::add_process_set({1, 0});
  const int id = pair.id();
  job.rec.check(id == next_id && pair.ranks() == std::vector<int>{0, 1}, "add pair",
                "id " + std::to_string(id) + " ranks " + list(pair.ranks()));
  if (job.rank <= 1) set_mismatches(job, pair);
  float x = 1.0f;
  herd::Handle orphan;
  if (job.rank == 0) {  // rank 1 never submits it
    orphan = herd::allreduce_async("orphan", f32(&x, {}), f32(&x, {}), ReduceOp::kSum, 1, 1, pair);
  }
  herd::remove_process_set(pair);
  if (job.rank == 0) {
    expect_error(job, "pending on a removed set",
                 std::vector<std::string>{"orphan", "process set", "removed"},
                 [&] { herd::wait(orphan); });
  }
  const std::string gone = "there is no process set " + std::to_string(id);
  expect_error(
      job, "use removed", "allreduce 'after': " + gone + " (removed, or never added)",
      [&] { herd::allreduce("after", f32(&x, {}), f32(&x, {}), ReduceOp::kSum, 1, 1, pair); });
  expect_error(job, "remove twice", std::vector<std::string>{gone},
               [&] { herd::remove_process_set(pair); });
  ProcessSet again = herd::add_process_set({0, 1});
  job.rec.check(again.id() == id + 1, "ids are not reused", "id " + std::to_string(again.id()));
  if (job.rank <= 1) {
    CaseCheck c(job.rec, "set of removed ranks again");
    x = job.rank + 1.0f;
    guarded(c, [&] {
      herd::allreduce("orphan", f32(&x, {}), f32(&x, {}), ReduceOp::kSum, 1, 1, again);
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
  std::vector<int> evens;  // descending: add_process_set sorts them
  std::vector<int> odds;
  for (int r = job.size - 1; r >= 0; --r) (r % 2 ? odds : evens).push_back(r);
  add_errors(job);
  // Made at init with HERD_PROCESS_SETS; the hand-made values name them.
  ProcessSet even = preset ? ProcessSet(1, {0, 2}) : herd::add_process_set(evens);
  ProcessSet odd = preset         ? ProcessSet(2, {1, 3})
                   : odds.empty() ? ProcessSet()
                                  : herd::add_process_set(odds);
  std::reverse(evens.begin(), evens.end());
  std::reverse(odds.begin(), odds.end());
  job.rec.check(even.id() == 1 && even.ranks() == evens, "even set",
                "id " + std::to_string(even.id()) + " ranks " + list(even.ranks()));
  job.rec.check(odds.empty() || (odd.id() == 2 && odd.ranks() == odds), "odd set",
                "id " + std::to_string(odd.id()) + " ranks " + list(odd.ranks()));
  int next_id = odds.empty() ? 2 : 3;
  expect_error(job, "add existing",
               "herd::add_process_set: process set 1 already has ranks " + list(evens),
               [&] { herd::add_process_set(evens); });

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
  expect_error(job, "use removed even set",
               "barrier: there is no process set 1 (removed, or never added)",
               [&] { herd::barrier(even); });
  ProcessSet readded = herd::add_process_set(evens);
  job.rec.check(readded.id() == next_id, "next id",
                "id " + std::to_string(readded.id()) + ", expected " + std::to_string(next_id));
  if (job.rank % 2 == 0) set_collectives(job, readded, "re-added");
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_process_sets", world.rank);
  const Job job{rec, world.rank, world.size};
  try {
    herd::init();
    run(job);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  shutdown_herd(rec);
  MPI_Finalize();
  return code;
}
