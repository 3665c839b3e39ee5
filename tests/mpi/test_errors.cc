// Multi-rank test of herd's error paths that must not hang or poison later
// work: ranks disagreeing on a name's signature (dtype, op, shape, prescale,
// postscale; also on a name the response cache already holds), a name
// submitted again while still pending, and malformed views.
//
// Each mismatch must fail every rank's wait with a herd::Error whose text is
// exactly the one built here for the rank count at hand, e.g.
//   allreduce 'grad/fc1': shape mismatch: rank 0 [4,3], rank 1 [4,2]
// and the same name (and a new one) must then reduce correctly.
//
// The program initializes MPI itself, so herd must leave MPI running after
// shutdown(); the failure counts are summed over MPI after herd has shut down.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

// This process in the job, and where results go.
struct Job {
  Recorder& rec;
  int rank;
  int size;
};

// What one rank submits for a name.
struct Signature {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::vector<int64_t> shape = {4, 3};
  double prescale = 1.0;
  double postscale = 1.0;
};

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

// One clause per differing field, in herd's order, listing every rank.
std::string mismatch_message(const std::string& name, const std::vector<Signature>& by_rank) {
  std::vector<std::string> clauses;
  auto clause = [&](const char* field, auto value_of) {
    bool differs = false;
    std::string text = std::string(field) + " mismatch: ";
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      differs = differs || value_of(by_rank[r]) != value_of(by_rank[0]);
      text += (r > 0 ? ", rank " : "rank ") + std::to_string(r) + " " + value_of(by_rank[r]);
    }
    if (differs) clauses.push_back(text);
  };
  clause("dtype", [](const Signature& s) { return dtype_name(s.dtype); });
  clause("op", [](const Signature& s) { return op_name(s.op); });
  clause("shape", [](const Signature& s) { return shape_string(s.shape); });
  clause("prescale", [](const Signature& s) { return double_string(s.prescale); });
  clause("postscale", [](const Signature& s) { return double_string(s.postscale); });
  std::string message = "allreduce '" + name + "': ";
  for (std::size_t i = 0; i < clauses.size(); ++i) message += (i > 0 ? "; " : "") + clauses[i];
  return message;
}

// Submits this rank's signature of `name`; every rank's wait must throw the
// message mismatch_message builds.
void expect_mismatch(const Job& job, const std::string& name,
                     const std::vector<Signature>& by_rank) {
  Recorder& rec = job.rec;
  const std::string case_name = "mismatch " + name;
  const std::string expected = mismatch_message(name, by_rank);
  const Signature& mine = by_rank[job.rank];
  std::vector<uint64_t> buffer(count_of(mine.shape) + 1, 0);
  const herd::TensorView view{buffer.data(), mine.dtype, mine.shape};
  herd::Handle handle;
  try {
    handle = herd::allreduce_async(name, view, view, mine.op, mine.prescale, mine.postscale);
  } catch (const herd::Error& e) {
    rec.fail(case_name, std::string("allreduce_async threw: ") + e.what());
    return;
  }
  try {
    herd::wait(handle);
    rec.fail(case_name, "wait returned; expected herd::Error \"" + expected + "\"");
  } catch (const herd::Error& e) {
    rec.check(e.what() == expected, case_name,
              "expected \"" + expected + "\", actual \"" + e.what() + "\"");
  } catch (const std::exception& e) {
    rec.fail(case_name, std::string("wait threw a non-herd::Error: ") + e.what());
  }
  rec.check(herd::poll(handle), case_name, "poll is false after a failed wait");
}

// A float32 [4,3] sum of rank + 1 + i: expected size*(size+1)/2 + size*i.
void expect_ok(const Job& job, const std::string& name, const std::string& case_name) {
  std::vector<float> data(12);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(job.rank + 1 + i);
  const herd::TensorView view{data.data(), DataType::kFloat32, {4, 3}};
  CaseCheck c(job.rec, case_name + " " + name);
  try {
    herd::allreduce(name, view, view, ReduceOp::kSum);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  for (int i = 0; i < 12; ++i) {
    const double expected = job.size * (job.size + 1) / 2.0 + static_cast<double>(job.size) * i;
    if (data[i] != expected) c.mismatch(i, double_string(expected), double_string(data[i]));
  }
}

using Vary = void (*)(int rank, int size, Signature* s);

std::vector<Signature> signatures(const Job& job, Vary vary) {
  std::vector<Signature> by_rank(job.size);
  for (int r = 0; r < job.size; ++r) vary(r, job.size, &by_rank[r]);
  return by_rank;
}

void test_mismatches(const Job& job) {
  struct Case {
    const char* name;
    Vary vary;
  };
  const Case kCases[] = {
      {"grad/fc1",
       [](int r, int n, Signature* s) {
         s->shape = {4, 3 - (r % 2)};
       }},
      {"mismatch/dtype",
       [](int r, int n, Signature* s) {
         s->dtype = r % 2 ? DataType::kInt32 : DataType::kFloat32;
       }},
      {"mismatch/op", [](int r, int n, Signature* s) { s->op = static_cast<ReduceOp>(r % 5); }},
      {"mismatch/prescale", [](int r, int n, Signature* s) { s->prescale = 1.0 + 0.5 * r; }},
      {"mismatch/postscale", [](int r, int n, Signature* s) { s->postscale = r % 2 ? 0.25 : 1.0; }},
      {"mismatch/two_fields",
       [](int r, int n, Signature* s) {
         s->dtype = r % 2 ? DataType::kFloat64 : DataType::kFloat32;
         s->shape = {4, 3 + (r % 2)};
       }},
      {"mismatch/last_rank_only",
       [](int r, int n, Signature* s) {
         s->shape = {4, r == n - 1 ? 1 : 3};
       }},
  };
  for (const Case& c : kCases) {
    expect_mismatch(job, c.name, signatures(job, c.vary));
    expect_ok(job, c.name, "after mismatch, same name");
    expect_ok(job, std::string(c.name) + "/new", "after mismatch, new name");
  }
  // Names the response cache already holds: a hit on some ranks and a new
  // signature on others must still fail everywhere, then work again.
  const Case kCached[] = {
      {"cached/odd_ranks_differ",
       [](int r, int n, Signature* s) {
         s->shape = {4, 3 - (r % 2)};
       }},
      {"cached/rank0_differs",
       [](int r, int n, Signature* s) { s->op = r == 0 ? ReduceOp::kMax : ReduceOp::kSum; }},
  };
  for (const Case& c : kCached) {
    expect_ok(job, c.name, "before cached mismatch, 1st");
    expect_ok(job, c.name, "before cached mismatch, 2nd");
    expect_mismatch(job, c.name, signatures(job, c.vary));
    expect_ok(job, c.name, "after cached mismatch, 1st");
    expect_ok(job, c.name, "after cached mismatch, 2nd");
  }
}

// Submitting a name that is still pending on this rank throws at once. With
// several ranks, rank `late` holds its submission back until the others have
// tried the duplicate, so the first submission is certainly still pending.
void test_duplicate(const Job& job, int late) {
  Recorder& rec = job.rec;
  const std::string name = "dup/late" + std::to_string(late);
  const std::string case_name = "duplicate " + name;
  std::vector<float> data(12, 1.0f);
  const herd::TensorView view{data.data(), DataType::kFloat32, {4, 3}};
  herd::Handle first;
  auto submit_first = [&] {
    try {
      first = herd::allreduce_async(name, view, view, ReduceOp::kSum);
    } catch (const herd::Error& e) {
      rec.fail(case_name, std::string("first allreduce_async threw: ") + e.what());
    }
  };
  if (job.size == 1 || job.rank != late) {
    submit_first();
    const bool pending = first.valid() && !herd::poll(first);
    if (job.size > 1)
      rec.check(pending, case_name, "first submission not pending before all ranks sent it");
    std::vector<float> other(12, 1.0f);
    const herd::TensorView other_view{other.data(), DataType::kFloat32, {4, 3}};
    try {
      herd::Handle second = herd::allreduce_async(name, other_view, other_view, ReduceOp::kSum);
      // One rank cannot hold a name back: the first may already be done.
      if (job.size > 1 || !herd::poll(first)) {
        rec.fail(case_name, "second allreduce_async of a pending name did not throw");
      } else {
        herd::wait(second);
        rec.pass();
      }
    } catch (const herd::Error&) {
      rec.pass();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (job.size > 1 && job.rank == late) submit_first();
  if (!first.valid()) return;
  CaseCheck c(rec, case_name + " result");
  try {
    herd::wait(first);
  } catch (const herd::Error& e) {
    c.fail(std::string("wait threw: ") + e.what());
    return;
  }
  for (int i = 0; i < 12; ++i) {
    if (data[i] != job.size) c.mismatch(i, std::to_string(job.size), double_string(data[i]));
  }
}

// Each malformed submission throws herd::Error at once, on this rank alone,
// and leaves the name free: all ranks then reduce it normally.
void test_malformed(const Job& job) {
  Recorder& rec = job.rec;
  std::vector<float> a(16, 1.0f);
  std::vector<float> b(16, 1.0f);
  std::vector<int32_t> ints(16, 1);
  struct Bad {
    const char* what;
    herd::TensorView input;
    herd::TensorView output;
  };
  const Bad kBad[] = {
      {"dtypes differ", {a.data(), DataType::kFloat32, {4}}, {ints.data(), DataType::kInt32, {4}}},
      {"element counts differ",
       {a.data(), DataType::kFloat32, {4}},
       {b.data(), DataType::kFloat32, {5}}},
      {"null input", {nullptr, DataType::kFloat32, {3}}, {b.data(), DataType::kFloat32, {3}}},
      {"null output", {a.data(), DataType::kFloat32, {3}}, {nullptr, DataType::kFloat32, {3}}},
      {"negative extent",
       {a.data(), DataType::kFloat32, {2, -3}},
       {a.data(), DataType::kFloat32, {2, -3}}},
      {"negative extent, other zero",
       {a.data(), DataType::kFloat32, {0, -1}},
       {a.data(), DataType::kFloat32, {0, -1}}},
  };
  for (const Bad& bad : kBad) {
    const std::string case_name = std::string("malformed (") + bad.what + ")";
    try {
      (void)herd::allreduce_async("bad/x", bad.input, bad.output, ReduceOp::kSum);
      rec.fail(case_name, "allreduce_async did not throw");
    } catch (const herd::Error&) {
      rec.pass();
    } catch (const std::exception& e) {
      rec.fail(case_name, std::string("threw a non-herd::Error: ") + e.what());
    }
  }
  // Shapes whose size overflows int64: refused naming the tensor and the
  // shape, never wrapped into a small count.
  const int64_t big = (int64_t{1} << 62) + 1;
  const struct {
    const char* what;
    herd::TensorView view;
    std::string expected;
  } kOverflow[] = {
      {"elements wrap to 4",
       {a.data(), DataType::kFloat32, {big, 4}},
       "allreduce 'bad/x': input shape [4611686018427387905,4] has more elements than "
       "2^63-1 (the product of its extents overflows int64)"},
      {"elements wrap to 2^32",
       {a.data(), DataType::kFloat32, {int64_t{1} << 32, (int64_t{1} << 32) + 1}},
       "allreduce 'bad/x': input shape [4294967296,4294967297] has more elements than "
       "2^63-1 (the product of its extents overflows int64)"},
      {"bytes overflow",
       {a.data(), DataType::kFloat64, {int64_t{1} << 60, 2}},
       "allreduce 'bad/x': input shape [1152921504606846976,2] of float64 "
       "(2305843009213693952 elements of 8 bytes) is larger than 2^63-1 bytes"},
  };
  for (const auto& bad : kOverflow) {
    const std::string message =
        error_of([&] { (void)herd::allreduce_async("bad/x", bad.view, bad.view, ReduceOp::kSum); });
    rec.check(message == bad.expected, std::string("overflow (") + bad.what + ")",
              "expected \"" + bad.expected + "\", got \"" + message + "\"");
  }
  {
    herd::Tensor gathered;
    const std::string message = error_of([&] {
      (void)herd::allgather_async("bad/x", {a.data(), DataType::kInt8, {4, big}}, &gathered);
    });
    const std::string expected =
        "allgather 'bad/x': input shape [4,4611686018427387905] has more elements than "
        "2^63-1 (the product of its extents overflows int64)";
    rec.check(message == expected, "overflow (allgather)",
              "expected \"" + expected + "\", got \"" + message + "\"");
  }
  expect_ok(job, "bad/x", "after malformed views");
  // Null data is fine when there are no elements.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, std::vector<int64_t>{3, 0}}) {
    const herd::TensorView empty{nullptr, DataType::kFloat32, shape};
    const std::string name = "empty/null" + shape_string(shape);
    try {
      herd::allreduce(name, empty, empty, ReduceOp::kSum);
      rec.pass();
    } catch (const herd::Error& e) {
      rec.fail("null data, no elements " + name, std::string("threw: ") + e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_errors", world.rank);
  const Job job{rec, world.rank, world.size};
  rec.check(world.provided == MPI_THREAD_MULTIPLE, "mpi", "MPI_THREAD_MULTIPLE not provided");
  try {
    herd::init();
    rec.check(herd::rank() == world.rank && herd::size() == world.size, "init",
              "herd rank/size differ from MPI's");
    if (world.size > 1) test_mismatches(job);
    test_duplicate(job, 0);
    if (world.size > 1) test_duplicate(job, 1);
    test_malformed(job);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
