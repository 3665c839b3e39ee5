// herd::fail: one rank ends the job with its reason, and every other rank's
// operations fail with that reason, naming the rank by host and pid.
//
// The last rank calls herd::fail while rank 0 waits in an allreduce that the
// last rank never submits; with 3 ranks, rank 1 submits its allreduce only
// after the failure. Every other rank's error must hold "rank F (host H, pid
// P): <reason>", with H and P learned here before the failure (gethostname,
// getpid, gathered over MPI), within a bound, and so must a later
// submission, also on another process set; herd::shutdown then returns. The failing rank: herd is
// shut down (is_initialized false, calls refused as after herd::shutdown) and herd::init refuses to
// start again. Before that, every misuse is refused and sends nothing: an empty reason, and
// herd::fail before herd::init.
//
// After the failure MPI is not finalized (docs/errors.md), which mpirun
// reports with a non-zero status: each rank prints "rank R passed" or
// "rank R FAILED: ...", and ctest reads those lines.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "herd/herd.h"

namespace {

using Clock = std::chrono::steady_clock;

const char* const kReason = "bad record at byte 96 of x.rec";
// Generous: on one machine the notice arrives within milliseconds.
constexpr double kBoundSeconds = 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Verdict {
  int rank = -1;
  std::vector<std::string> failures;
  void expect(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
  int report() const {
    if (failures.empty()) {
      std::printf("rank %d passed\n", rank);
    } else {
      for (const std::string& f : failures) std::printf("rank %d FAILED: %s\n", rank, f.c_str());
    }
    std::fflush(stdout);
    return failures.empty() ? 0 : 1;
  }
};

// The error text of `call`, or "" when it does not throw herd::Error.
template <typename Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const herd::Error& e) {
    return e.what();
  }
  return "";
}

// "rank R (host H, pid P)" for every rank, from each rank's own account.
std::vector<std::string> rank_names(int size) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::vector<char> hosts(static_cast<std::size_t>(size) * sizeof(host));
  MPI_Allgather(host, sizeof(host), MPI_CHAR, hosts.data(), sizeof(host), MPI_CHAR, MPI_COMM_WORLD);
  const int pid = static_cast<int>(getpid());
  std::vector<int> pids(static_cast<std::size_t>(size));
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<std::string> names;
  for (int r = 0; r < size; ++r) {
    names.push_back("rank " + std::to_string(r) + " (host " +
                    std::string(hosts.data() + static_cast<std::size_t>(r) * sizeof(host)) +
                    ", pid " + std::to_string(pids[static_cast<std::size_t>(r)]) + ")");
  }
  return names;
}

float reduce_one(const std::string& name, float value,
                 const herd::ProcessSet& set = herd::global_process_set()) {
  float out = 0;
  herd::allreduce(name, herd::TensorView{&value, herd::DataType::kFloat32, {1}},
                  herd::TensorView{&out, herd::DataType::kFloat32, {1}}, herd::ReduceOp::kSum, 1.0,
                  1.0, set);
  return out;
}

}  // namespace

int main() {
  Verdict verdict;
  const std::string before_init = error_of([] { herd::fail(kReason); });
  herd::init();
  const int rank = herd::rank();
  const int size = herd::size();
  verdict.rank = rank;
  verdict.expect(before_init.find("herd::fail: herd is not initialized") != std::string::npos,
                 "herd::fail before herd::init: '" + before_init + "'");
  const std::vector<std::string> names = rank_names(size);
  const int failing = size - 1;
  const std::string expected = names[static_cast<std::size_t>(failing)] + ": " + kReason;

  // Misuse sends nothing: the job goes on.
  const std::string empty = error_of([] { herd::fail(""); });
  verdict.expect(empty == "herd::fail: the reason is empty; say what went wrong",
                 "herd::fail(\"\"): '" + empty + "'");
  const float sum = reduce_one("fail/before", static_cast<float>(rank + 1));
  // Every set ends, not only the one whose operation waited.
  std::vector<int> everyone;
  for (int r = 0; r < size; ++r) everyone.push_back(r);
  const herd::ProcessSet set = herd::add_process_set(everyone);
  verdict.expect(sum == static_cast<float>(size * (size + 1) / 2),
                 "the allreduce before the failure gave " + std::to_string(sum));

  if (rank == failing) {
    // The others are waiting by now (rank 0), or will submit later (rank 1).
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::string failed = error_of([] { herd::fail(kReason); });
    verdict.expect(failed.empty(), "herd::fail threw '" + failed + "'");
    verdict.expect(!herd::is_initialized(), "herd is still initialized after herd::fail");
    const std::string after = error_of([] { herd::rank(); });
    verdict.expect(after == "herd::rank: herd has been shut down",
                   "herd::rank after herd::fail: '" + after + "'");
    const std::string again = error_of([] { herd::fail(kReason); });
    verdict.expect(again == "herd::fail: herd has been shut down",
                   "herd::fail after herd::fail: '" + again + "'");
    const std::string reinit = error_of([] { herd::init(); });
    verdict.expect(reinit.find("cannot start again") != std::string::npos &&
                       reinit.find(expected) != std::string::npos,
                   "herd::init after herd::fail: '" + reinit + "'");
    return verdict.report();
  }

  const bool late = rank == 1 && size > 2;
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Clock::time_point start = Clock::now();
  const std::string first = error_of([&] { reduce_one("fail/grad", 1.0f); });
  const double seconds = seconds_since(start);
  verdict.expect(first.find(expected) != std::string::npos,
                 std::string(late ? "the late" : "the waiting") + " allreduce's error '" + first +
                     "' lacks '" + expected + "'");
  verdict.expect(seconds < kBoundSeconds,
                 "the allreduce failed after " + std::to_string(seconds) + " s");
  const std::string later = error_of([&] { reduce_one("fail/later", 1.0f); });
  verdict.expect(later.find(expected) != std::string::npos,
                 "the later allreduce's error '" + later + "' lacks '" + expected + "'");
  const std::string on_set = error_of([&] { reduce_one("fail/set", 1.0f, set); });
  verdict.expect(on_set.find(expected) != std::string::npos,
                 "the allreduce on process set " + std::to_string(set.id()) + "'s error '" +
                     on_set + "' lacks '" + expected + "'");
  const Clock::time_point shutdown_start = Clock::now();
  const std::string shutdown = error_of([] { herd::shutdown(); });
  verdict.expect(shutdown.empty(), "herd::shutdown threw '" + shutdown + "'");
  verdict.expect(seconds_since(shutdown_start) < kBoundSeconds, "herd::shutdown took too long");
  return verdict.report();
}
