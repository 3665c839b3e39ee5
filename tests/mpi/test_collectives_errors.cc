// Multi-rank test of the error paths of allgather, broadcast, alltoall,
// reducescatter, and of one name used for two kinds of collective.
//
// A disagreement between ranks must fail every rank's wait with a herd::Error
// whose text is exactly the one built here for the rank count at hand, e.g.
//   allgather 'gather/x': shape mismatch beyond the first dimension: rank 0 [2,3], rank 1 [2,4]
//   allreduce 'mixed': collective mismatch: rank 0 allreduce, rank 1 allgather
// (one clause per differing field, every rank listed, clauses joined by "; ",
// the collective named as rank 0 submitted it), and the same name must then
// work. Bad arguments found on the calling rank (a broadcast root out of
// range, alltoall splits of the wrong length, negative, or not adding up to
// the first dimension) throw at once from the submitting call. With one rank
// only the local checks run.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;
using Shape = std::vector<int64_t>;

struct Job {
  Recorder& rec;
  int rank;
  int size;
};

// "<label>: rank 0 <v0>, rank 1 <v1>, ...", or "" when all ranks agree on
// key(r) (by default the listed value itself).
std::string clause(const std::string& label, int size, const std::function<std::string(int)>& v,
                   std::function<std::string(int)> key = nullptr) {
  if (!key) key = v;
  bool differs = false;
  std::string text = label + ": ";
  for (int r = 0; r < size; ++r) {
    differs = differs || key(r) != key(0);
    text += (r > 0 ? ", rank " : "rank ") + std::to_string(r) + " " + v(r);
  }
  return differs ? text : "";
}

std::string message(const std::string& collective, const std::string& name,
                    const std::vector<std::string>& clauses) {
  std::string text = collective + " '" + name + "': ";
  bool first = true;
  for (const std::string& c : clauses) {
    if (c.empty()) continue;
    text += (first ? "" : "; ") + c;
    first = false;
  }
  return text;
}

// Runs this rank's submission; its wait must throw exactly `expected`.
void expect_wait_error(const Job& job, const std::string& case_name,
                       const std::function<herd::Handle()>& submit, const std::string& expected) {
  herd::Handle handle;
  try {
    handle = submit();
  } catch (const herd::Error& e) {
    job.rec.fail(case_name, std::string("submission threw: ") + e.what());
    return;
  }
  try {
    herd::wait(handle);
    job.rec.fail(case_name, "wait returned; expected herd::Error \"" + expected + "\"");
  } catch (const herd::Error& e) {
    job.rec.check(e.what() == expected, case_name,
                  "expected \"" + expected + "\", actual \"" + e.what() + "\"");
  } catch (const std::exception& e) {
    job.rec.fail(case_name, std::string("wait threw a non-herd::Error: ") + e.what());
  }
  job.rec.check(herd::poll(handle), case_name, "poll is false after a failed wait");
}

// The submission must throw herd::Error at once, its text containing `parts`.
void expect_throw_now(const Job& job, const std::string& case_name,
                      const std::function<herd::Handle()>& submit,
                      const std::vector<std::string>& parts) {
  try {
    herd::Handle handle = submit();
    job.rec.fail(case_name, "submission did not throw");
    try {
      herd::wait(handle);
    } catch (const herd::Error&) {
    }
  } catch (const herd::Error& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) {
      job.rec.check(what.find(part) != std::string::npos, case_name,
                    "message \"" + what + "\" lacks \"" + part + "\"");
    }
  }
}

// --- the same names working afterwards ----------------------------------------

// Rank r gathers [r+1, 3] float32 of 100*r + i.
void ok_allgather(const Job& job, const std::string& name, const std::string& when) {
  CaseCheck c(job.rec, when + " allgather " + name);
  std::vector<float> input(3 * (job.rank + 1));
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = 100.0f * job.rank + i;
  herd::Tensor output;
  try {
    herd::allgather(name, {input.data(), DataType::kFloat32, {job.rank + 1, 3}}, &output);
  } catch (const herd::Error& e) {
    return c.fail(std::string("threw: ") + e.what());
  }
  const int64_t rows = job.size * (job.size + 1) / 2;
  if (output.shape() != Shape{rows, 3} || output.dtype() != DataType::kFloat32) {
    return c.fail("output shape " + shape_string(output.shape()) + ", expected " +
                  shape_string({rows, 3}));
  }
  for (int s = 0; s < job.size; ++s) {
    const int64_t at = 3 * s * (s + 1) / 2;
    for (int64_t i = 0; i < 3 * (s + 1); ++i) {
      const double expected = 100.0 * s + i;
      const double actual = output.data_as<float>()[at + i];
      if (actual != expected) c.mismatch(at + i, double_string(expected), double_string(actual));
    }
  }
}

// [2,3] float32 sums of rank + 1 + i.
void ok_allreduce(const Job& job, const std::string& name, const std::string& when) {
  CaseCheck c(job.rec, when + " allreduce " + name);
  std::vector<float> data(6);
  for (int i = 0; i < 6; ++i) data[i] = static_cast<float>(job.rank + 1 + i);
  try {
    herd::allreduce(name, {data.data(), DataType::kFloat32, {2, 3}},
                    {data.data(), DataType::kFloat32, {2, 3}}, ReduceOp::kSum);
  } catch (const herd::Error& e) {
    return c.fail(std::string("threw: ") + e.what());
  }
  for (int i = 0; i < 6; ++i) {
    const double expected = job.size * (job.size + 1) / 2.0 + static_cast<double>(job.size) * i;
    if (data[i] != expected) c.mismatch(i, double_string(expected), double_string(data[i]));
  }
}

void ok_broadcast(const Job& job, const std::string& name, int root, const std::string& when) {
  CaseCheck c(job.rec, when + " broadcast " + name + " root " + std::to_string(root));
  std::vector<float> data(5, -1.0f);
  for (int i = 0; i < 5 && job.rank == root; ++i) data[i] = 10.0f * root + i + 0.5f;
  try {
    herd::broadcast(name, {data.data(), DataType::kFloat32, {5}}, root);
  } catch (const herd::Error& e) {
    return c.fail(std::string("threw: ") + e.what());
  }
  for (int i = 0; i < 5; ++i) {
    const double expected = 10.0 * root + i + 0.5;
    if (data[i] != expected) c.mismatch(i, double_string(expected), double_string(data[i]));
  }
}

// Even split of [2p, 3] float32; row j of rank s holds 1000*s + 3*j + k.
void ok_alltoall(const Job& job, const std::string& name, const std::string& when) {
  CaseCheck c(job.rec, when + " alltoall " + name);
  const int p = job.size;
  std::vector<float> input(6 * p);
  for (int i = 0; i < 6 * p; ++i) input[i] = 1000.0f * job.rank + i;
  herd::Tensor output;
  std::vector<int64_t> received;
  try {
    herd::alltoall(name, {input.data(), DataType::kFloat32, {2 * p, 3}}, {}, &output, &received);
  } catch (const herd::Error& e) {
    return c.fail(std::string("threw: ") + e.what());
  }
  if (received != std::vector<int64_t>(p, 2)) c.fail("received_splits " + shape_string(received));
  if (output.shape() != Shape{2 * p, 3}) return c.fail("shape " + shape_string(output.shape()));
  for (int s = 0; s < p; ++s) {
    for (int i = 0; i < 6; ++i) {
      const double expected = 1000.0 * s + 6 * job.rank + i;
      const double actual = output.data_as<float>()[6 * s + i];
      if (actual != expected) c.mismatch(6 * s + i, double_string(expected), double_string(actual));
    }
  }
}

// [4,3] float32 sum of (rank + 1) * (i + 1); rank i keeps its rows of 4.
void ok_reducescatter(const Job& job, const std::string& name, const std::string& when) {
  CaseCheck c(job.rec, when + " reducescatter " + name);
  const int p = job.size;
  std::vector<float> input(12);
  for (int i = 0; i < 12; ++i) input[i] = static_cast<float>((job.rank + 1) * (i + 1));
  herd::Tensor output;
  try {
    herd::reducescatter(name, {input.data(), DataType::kFloat32, {4, 3}}, &output, ReduceOp::kSum);
  } catch (const herd::Error& e) {
    return c.fail(std::string("threw: ") + e.what());
  }
  const int64_t rows = 4 / p + (job.rank < 4 % p ? 1 : 0);
  const int64_t first = job.rank * (4 / p) + std::min(job.rank, 4 % p);
  if (output.shape() != Shape{rows, 3}) return c.fail("shape " + shape_string(output.shape()));
  for (int64_t i = 0; i < 3 * rows; ++i) {
    const double expected = p * (p + 1) / 2.0 * (3 * first + i + 1);
    const double actual = output.data_as<float>()[i];
    if (actual != expected) c.mismatch(i, double_string(expected), double_string(actual));
  }
}

// --- cross-rank mismatches ------------------------------------------------------

struct GatherSig {
  DataType dtype;
  Shape shape;
};

void gather_mismatch(const Job& job, const std::string& name,
                     const std::function<GatherSig(int)>& sig) {
  const GatherSig mine = sig(job.rank);
  std::vector<uint64_t> buffer = storage_for(mine.dtype, num_elements(mine.shape));
  herd::Tensor output;
  const std::string expected =
      message("allgather", name,
              {clause("dtype mismatch", job.size, [&](int r) { return dtype_name(sig(r).dtype); }),
               clause(
                   "shape mismatch beyond the first dimension", job.size,
                   [&](int r) { return shape_string(sig(r).shape); },
                   [&](int r) {  // only the trailing dims must agree
                     const Shape shape = sig(r).shape;
                     return shape_string(Shape(shape.begin() + 1, shape.end()));
                   })});
  expect_wait_error(
      job, "allgather mismatch " + name,
      [&] {
        return herd::allgather_async(name, {buffer.data(), mine.dtype, mine.shape}, &output);
      },
      expected);
  ok_allgather(job, name, "after mismatch");
}

void test_allgather(const Job& job) {
  const int last = job.size - 1;
  gather_mismatch(job, "gather/x", [](int r) {
    return GatherSig{DataType::kFloat32, {2, 3 + r % 2}};
  });
  gather_mismatch(job, "gather/dtype", [](int r) {
    return GatherSig{r % 2 ? DataType::kInt32 : DataType::kFloat32, {r + 1, 3}};
  });
  gather_mismatch(job, "gather/both", [](int r) {
    return GatherSig{r % 2 ? DataType::kFloat64 : DataType::kFloat32, {r + 1, 2 + r % 2}};
  });
  gather_mismatch(job, "gather/rank_of_last", [last](int r) {
    return GatherSig{DataType::kFloat32, r == last ? Shape{2, 3, 1} : Shape{2, 3}};
  });
  // A name the response cache already holds.
  ok_allgather(job, "gather/cached", "before mismatch, 1st");
  ok_allgather(job, "gather/cached", "before mismatch, 2nd");
  gather_mismatch(job, "gather/cached", [last](int r) {
    return GatherSig{DataType::kFloat32, {r + 1, r == last ? 4 : 3}};
  });
  ok_allgather(job, "gather/cached", "after mismatch, 2nd");
}

void test_broadcast_roots(const Job& job) {
  const int last = job.size - 1;
  const std::function<int(int)> kRoots[] = {[](int r) { return r; },
                                            [last](int r) { return r == last ? 1 : 0; }};
  const std::string kNames[] = {"bcast/x", "bcast/last"};
  for (int k = 0; k < 2; ++k) {
    const std::string& name = kNames[k];
    std::vector<float> data(5, 1.0f);
    const std::string expected = message(
        "broadcast", name,
        {clause("root mismatch", job.size, [&](int r) { return std::to_string(kRoots[k](r)); })});
    expect_wait_error(
        job, "broadcast mismatch " + name,
        [&] {
          return herd::broadcast_async(name, {data.data(), DataType::kFloat32, {5}},
                                       kRoots[k](job.rank));
        },
        expected);
    ok_broadcast(job, name, 0, "after mismatch");
    ok_broadcast(job, name, last, "after mismatch");
  }
}

void test_mixed(const Job& job) {
  const int last = job.size - 1;
  std::vector<float> data(12, 1.0f);
  herd::Tensor output;
  const herd::TensorView view23{data.data(), DataType::kFloat32, {2, 3}};
  auto expected = [&](const std::string& name, const std::function<std::string(int)>& kind) {
    return message(kind(0), name, {clause("collective mismatch", job.size, kind)});
  };
  const auto reduce_or_gather = [](int r) {
    return std::string(r == 0 ? "allreduce" : "allgather");
  };
  expect_wait_error(
      job, "mixed allreduce/allgather",
      [&] {
        return job.rank == 0 ? herd::allreduce_async("mixed", view23, view23, ReduceOp::kSum)
                             : herd::allgather_async("mixed", view23, &output);
      },
      expected("mixed", reduce_or_gather));
  ok_allreduce(job, "mixed", "after mixed");
  ok_allgather(job, "mixed", "after mixed");

  const auto gather_or_bcast = [last](int r) {
    return std::string(r == last ? "broadcast" : "allgather");
  };
  expect_wait_error(
      job, "mixed allgather/broadcast",
      [&] {
        return job.rank == last ? herd::broadcast_async("mixed/bcast", view23, 0)
                                : herd::allgather_async("mixed/bcast", view23, &output);
      },
      expected("mixed/bcast", gather_or_bcast));
  ok_broadcast(job, "mixed/bcast", 0, "after mixed");

  const int p = job.size;
  const herd::TensorView rows{data.data(), DataType::kFloat32, {2 * p, 1}};
  const auto rs_or_a2a = [](int r) { return std::string(r == 0 ? "reducescatter" : "alltoall"); };
  expect_wait_error(
      job, "mixed reducescatter/alltoall",
      [&] {
        return job.rank == 0 ? herd::reducescatter_async("mixed/rs", rows, &output, ReduceOp::kSum)
                             : herd::alltoall_async("mixed/rs", rows, {}, &output);
      },
      expected("mixed/rs", rs_or_a2a));
  ok_reducescatter(job, "mixed/rs", "after mixed");
}

void test_reducescatter(const Job& job) {
  struct Sig {
    Shape shape;
    ReduceOp op;
  };
  auto run = [&](const std::string& name, const std::function<Sig(int)>& sig) {
    const Sig mine = sig(job.rank);
    std::vector<float> data(12, 1.0f);
    herd::Tensor output;
    const std::string expected = message(
        "reducescatter", name,
        {clause("op mismatch", job.size, [&](int r) { return op_name(sig(r).op); }),
         clause("shape mismatch", job.size, [&](int r) { return shape_string(sig(r).shape); })});
    expect_wait_error(
        job, "reducescatter mismatch " + name,
        [&] {
          return herd::reducescatter_async(name, {data.data(), DataType::kFloat32, mine.shape},
                                           &output, mine.op);
        },
        expected);
    ok_reducescatter(job, name, "after mismatch");
  };
  run("rs/x", [](int r) { return Sig{{4, 3 - r % 2}, ReduceOp::kSum}; });
  run("rs/op", [](int r) { return Sig{{4, 3}, r % 2 ? ReduceOp::kMax : ReduceOp::kSum}; });
}

// --- bad arguments, found on the calling rank ---------------------------------

void test_local(const Job& job) {
  const int p = job.size;
  std::vector<float> data(64 * 4 * 3 + 16, 1.0f);
  for (int root : {7, -1, p}) {
    const std::string root_text = "root " + std::to_string(root);
    expect_throw_now(
        job, "broadcast " + root_text,
        [&] {
          return herd::broadcast_async("bcast/range", {data.data(), DataType::kFloat32, {5}}, root);
        },
        {"bcast/range", root_text, "size"});
  }
  ok_broadcast(job, "bcast/range", p - 1, "after bad root");

  herd::Tensor output;
  auto alltoall = [&](int64_t rows, std::vector<int64_t> splits) {
    return [&data, &output, rows, splits] {
      return herd::alltoall_async("a2a/bad", {data.data(), DataType::kFloat32, {rows, 3}}, splits,
                                  &output);
    };
  };
  std::vector<int64_t> too_long(p + 1, 0);
  too_long[0] = 2;
  expect_throw_now(job, "alltoall splits too long", alltoall(2, too_long), {"a2a/bad", "splits"});
  if (p > 1) {
    expect_throw_now(job, "alltoall splits too short", alltoall(2, std::vector<int64_t>(p - 1, 1)),
                     {"a2a/bad", "splits"});
  }
  std::vector<int64_t> negative(p, 0);
  negative[0] = -2;
  if (p > 1) negative[1] = 5;
  expect_throw_now(job, "alltoall negative split", alltoall(p > 1 ? 3 : 1, negative),
                   {"a2a/bad", "splits", "-2"});
  const std::vector<int64_t> forty(p, 40);
  expect_throw_now(job, "alltoall splits sum", alltoall(40 * p + 7, forty),
                   {"a2a/bad", "splits", std::to_string(40 * p), std::to_string(40 * p + 7)});
  if (p >= 3) {
    // INT64_MAX + INT64_MAX + 4 wraps around to 2, the first dimension.
    std::vector<int64_t> wrapping(p, 0);
    wrapping[0] = INT64_MAX;
    wrapping[1] = INT64_MAX;
    wrapping[2] = 4;
    expect_throw_now(job, "alltoall splits whose sum overflows", alltoall(2, wrapping),
                     {"a2a/bad", "splits", "9223372036854775807", "sum to more than 2^63-1"});
  }
  ok_alltoall(job, "a2a/bad", "after bad splits");

  // Even split of rows that are not a multiple of p: at once or in wait.
  if (p > 1) {
    const std::string case_name = "alltoall even split of " + std::to_string(p + 1) + " rows";
    try {
      herd::wait(alltoall(p + 1, {})());
      job.rec.fail(case_name, "no herd::Error");
    } catch (const herd::Error& e) {
      job.rec.check(std::string(e.what()).find("a2a/bad") != std::string::npos, case_name,
                    std::string("message \"") + e.what() + "\" lacks \"a2a/bad\"");
    }
    ok_alltoall(job, "a2a/bad", "after uneven even split");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_collectives_errors", world.rank);
  const Job job{rec, world.rank, world.size};
  try {
    herd::init();
    if (world.size > 1) {
      test_allgather(job);
      test_broadcast_roots(job);
      test_mixed(job);
      test_reducescatter(job);
    }
    test_local(job);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  shutdown_herd(rec);
  MPI_Finalize();
  return code;
}
