// Multi-rank test of the counters (herd::stats(), HERD_STATS; docs/operations.md).
//
// Every rank runs a known sequence of collectives and checks its counters
// against the counts and bytes computed here from the sequence itself:
// blocking allreduces (one run each), a batch of asynchronous allreduces
// (fused: between one run and one per tensor), an allreduce whose shape
// differs between the ranks (failed on every rank, no bytes), an allgather
// whose rows differ per rank, a broadcast, a reducescatter, a grouped
// allreduce (one operation, both members' bytes), barriers, and an allreduce
// on a process set of ranks {0, 1}. The times must be positive, a run no
// longer than its operations, and the operations no longer than the test's
// own clock around them allows. Mode "api": nothing is printed at shutdown
// (stderr captured around herd::shutdown); the counters stay readable after
// it and a second herd::init starts them from zero. Mode "print" (ctest sets
// HERD_STATS=1): the text written to stderr at shutdown is
// herd::format_stats(rank, herd::stats()).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using herd::TensorView;
using herd_test::Recorder;

using Key = std::pair<int, std::string>;  // process set, collective

std::map<Key, herd::CollectiveStats> by_key(const std::vector<herd::CollectiveStats>& stats) {
  std::map<Key, herd::CollectiveStats> result;
  for (const herd::CollectiveStats& s : stats) result[{s.process_set, s.collective}] = s;
  return result;
}

struct Expected {
  int64_t count = 0;
  int64_t failed = 0;
  int64_t bytes = 0;
  int64_t min_runs = 0;
  int64_t max_runs = 0;
};

// Runs the sequence; returns what each (set, collective) must show, and the
// seconds it took on this rank's clock.
std::map<Key, Expected> run_sequence(Recorder& rec, int rank, int size, double* seconds) {
  std::map<Key, Expected> expected;
  const auto start = std::chrono::steady_clock::now();

  std::vector<float> ten(10, 1.0f);
  for (int i = 0; i < 3; ++i) {
    const TensorView view{ten.data(), DataType::kFloat32, {10}};
    herd::allreduce("stats/blocking" + std::to_string(i), view, view, ReduceOp::kSum);
  }
  expected[{0, "allreduce"}] = {3, 0, 3 * 40, 3, 3};

  std::vector<std::vector<double>> batch(4, std::vector<double>(6, 2.0));
  std::vector<herd::Handle> handles;
  for (int i = 0; i < 4; ++i) {
    const TensorView view{batch[i].data(), DataType::kFloat64, {6}};
    handles.push_back(
        herd::allreduce_async("stats/batch" + std::to_string(i), view, view, ReduceOp::kSum));
  }
  for (herd::Handle& h : handles) herd::wait(h);
  Expected& allreduce = expected[{0, "allreduce"}];
  allreduce.count += 4;
  allreduce.bytes += 4 * 48;
  allreduce.min_runs += 1;
  allreduce.max_runs += 4;

  if (size > 1) {
    // Rank 0 asks for 4 elements, the others for 5: fails on every rank.
    std::vector<float> odd(static_cast<std::size_t>(rank == 0 ? 4 : 5), 1.0f);
    const TensorView view{odd.data(), DataType::kFloat32, {static_cast<int64_t>(odd.size())}};
    herd_test::expect_throws(rec, "mismatched allreduce", "a shape mismatch error", [&] {
      herd::allreduce("stats/mismatch", view, view, ReduceOp::kSum);
    });
    allreduce.failed = 1;
  }

  // rank + 1 rows of 2 int32.
  std::vector<int32_t> rows(static_cast<std::size_t>(2 * (rank + 1)), rank);
  herd::Tensor gathered;
  herd::allgather("stats/gather", {rows.data(), DataType::kInt32, {rank + 1, 2}}, &gathered);
  expected[{0, "allgather"}] = {1, 0, 8 * (rank + 1), 1, 1};

  std::vector<double> five(5, rank);
  herd::broadcast("stats/broadcast", {five.data(), DataType::kFloat64, {5}}, 0);
  expected[{0, "broadcast"}] = {1, 0, 40, 1, 1};

  std::vector<float> scatter(static_cast<std::size_t>(2 * size), 1.0f);
  herd::Tensor scattered;
  herd::reducescatter("stats/scatter", {scatter.data(), DataType::kFloat32, {2 * size}}, &scattered,
                      ReduceOp::kSum);
  expected[{0, "reducescatter"}] = {1, 0, 8 * size, 1, 1};

  std::vector<float> a(3, 1.0f), b(4, 1.0f);
  const std::vector<TensorView> group = {{a.data(), DataType::kFloat32, {3}},
                                         {b.data(), DataType::kFloat32, {4}}};
  herd::grouped_allreduce({"stats/group/a", "stats/group/b"}, group, group, ReduceOp::kSum);
  expected[{0, "grouped allreduce"}] = {1, 0, 28, 1, 1};

  herd::barrier();
  herd::barrier();
  expected[{0, "barrier"}] = {2, 0, 0, 2, 2};

  if (size > 1) {
    const herd::ProcessSet pair = herd::add_process_set({0, 1});
    if (rank <= 1) {
      std::vector<int64_t> two(2, 7);
      const TensorView view{two.data(), DataType::kInt64, {2}};
      herd::allreduce("stats/pair", view, view, ReduceOp::kSum, 1.0, 1.0, pair);
      expected[{pair.id(), "allreduce"}] = {1, 0, 16, 1, 1};
    }
    herd::remove_process_set(pair);
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return expected;
}

void check_stats(Recorder& rec, const std::map<Key, Expected>& expected, double seconds) {
  const std::map<Key, herd::CollectiveStats> actual = by_key(herd::stats());
  rec.check(actual.size() == expected.size(), "entries",
            "herd::stats() has " + std::to_string(actual.size()) + " entries, expected " +
                std::to_string(expected.size()));
  for (const auto& [key, want] : expected) {
    const std::string name = "set " + std::to_string(key.first) + " " + key.second;
    auto found = actual.find(key);
    if (!rec.check(found != actual.end(), name, "missing from herd::stats()")) continue;
    const herd::CollectiveStats& s = found->second;
    rec.check(s.count == want.count, name + " count",
              std::to_string(s.count) + " != " + std::to_string(want.count));
    rec.check(s.failed == want.failed, name + " failed",
              std::to_string(s.failed) + " != " + std::to_string(want.failed));
    rec.check(s.bytes == want.bytes, name + " bytes",
              std::to_string(s.bytes) + " != " + std::to_string(want.bytes));
    rec.check(s.runs >= want.min_runs && s.runs <= want.max_runs, name + " runs",
              std::to_string(s.runs) + " outside [" + std::to_string(want.min_runs) + ", " +
                  std::to_string(want.max_runs) + "]");
    // A run ends at the completion of an operation submitted before it
    // began; the batch's 4 operations overlap, the others do not.
    rec.check(
        s.run_seconds > 0 && s.run_seconds <= s.total_seconds && s.total_seconds <= 4 * seconds,
        name + " times",
        "run " + std::to_string(s.run_seconds) + " s, total " + std::to_string(s.total_seconds) +
            " s, sequence " + std::to_string(seconds) + " s");
  }
}

// Runs `call` with stderr going to a temporary file; returns what it wrote.
template <typename Call>
std::string capture_stderr(Call&& call) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  const int saved = dup(fileno(stderr));
  dup2(fileno(file), fileno(stderr));
  call();
  std::fflush(stderr);
  dup2(saved, fileno(stderr));
  close(saved);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  std::fclose(file);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "api";
  // The program owns MPI, so that herd::init may run twice.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Recorder rec("test_stats " + mode, rank);
  try {
    herd::init();
    rec.check(herd::stats().empty(), "empty at init", "herd::stats() is not empty after init");
    double seconds = 0;
    const std::map<Key, Expected> expected = run_sequence(rec, rank, size, &seconds);
    check_stats(rec, expected, seconds);
    const std::string printed = capture_stderr([] { herd::shutdown(); });
    // Readable after shutdown, unchanged.
    check_stats(rec, expected, seconds);
    if (mode == "print") {
      const std::string table = herd::format_stats(rank, herd::stats());
      rec.check(printed == table, "printed table",
                "stderr at shutdown:\n" + printed + "expected:\n" + table);
    } else {
      rec.check(printed.find("herd stats") == std::string::npos, "nothing printed",
                "stderr at shutdown without HERD_STATS:\n" + printed);
      herd::init();
      rec.check(herd::stats().empty(), "empty at a second init",
                "herd::stats() kept the first job's counters");
      herd::barrier();
      const std::vector<herd::CollectiveStats> after = herd::stats();
      rec.check(after.size() == 1 && after[0].collective == "barrier" && after[0].count == 1,
                "counting again", "one barrier after the second init is not all herd::stats() has");
      herd::shutdown();
    }
  } catch (const std::exception& e) {
    rec.fail("exception", e.what());
  }
  return herd_test::finish_program_owned_mpi(rec);
}
