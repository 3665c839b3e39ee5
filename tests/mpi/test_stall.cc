// Multi-rank test of HERD_STALL_SHUTDOWN_TIME (set to 2 s by ctest): rank 1
// never submits two names the other ranks submit, one the response cache
// settles ("stall/cached", reduced once by every rank first) and one being
// negotiated ("stall/fresh").
//
// Every other rank's wait must throw herd::Error after at least 2 s and
// within 2 s plus slack, with exactly
//   allreduce 'stall/cached': herd stopped: tensors waited longer than
//   HERD_STALL_SHUTDOWN_TIME for ranks that did not submit them: rank 1 has
//   not submitted allreduce 'stall/cached' (ranks [0, 2] have waited 2.0 s),
//   allreduce 'stall/fresh' (ranks [0, 2] have waited 2.0 s)
// (the seconds may differ, but not between ranks: the text is rank 0's on
// every rank). Rank 1's set has stopped too: its own late submission fails
// with the same text. herd::shutdown then returns on every rank.
//
// The program initializes MPI itself (to compare the texts across ranks),
// so herd leaves MPI running after shutdown.
#include <mpi.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

constexpr double kShutdownSeconds = 2.0;  // HERD_STALL_SHUTDOWN_TIME in tests/mpi/CMakeLists.txt
constexpr double kSlackSeconds = 30.0;    // a loaded machine; the bound is what counts

// `text` with each "have waited <seconds> s" made "have waited _ s"; the
// seconds go to *waits.
std::string without_waits(const std::string& text, std::vector<double>* waits) {
  static const std::regex wait(R"(have waited (\d+\.\d) s)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), wait); it != std::sregex_iterator();
       ++it) {
    waits->push_back(std::stod((*it)[1].str()));
  }
  return std::regex_replace(text, wait, "have waited _ s");
}

// The message of the herd::Error that waiting on `handle` throws, without
// its "<description>: " prefix; "" (and a failure) if it does not throw.
std::string failure_reason(Recorder& rec, const std::string& case_name,
                           const std::string& description, const herd::Handle& handle) {
  try {
    herd::wait(handle);
    rec.fail(case_name, "wait returned; expected the stall shutdown");
  } catch (const herd::Error& e) {
    const std::string message = e.what();
    const std::string prefix = description + ": ";
    if (rec.check(message.rfind(prefix, 0) == 0, case_name,
                  "message lacks the prefix \"" + prefix + "\": \"" + message + "\"")) {
      return message.substr(prefix.size());
    }
  }
  return "";
}

void test_stall(Recorder& rec, int rank, int size) {
  // stall/cached once on every rank: sum over r of (r + 1 + i).
  std::vector<float> cached(4);
  for (int i = 0; i < 4; ++i) cached[i] = static_cast<float>(rank + 1 + i);
  const herd::TensorView cached_view{cached.data(), DataType::kFloat32, {4}};
  herd::allreduce("stall/cached", cached_view, cached_view, ReduceOp::kSum);
  {
    CaseCheck c(rec, "stall/cached, every rank");
    for (int i = 0; i < 4; ++i) {
      const double expected = size * (size + 1) / 2.0 + static_cast<double>(size) * i;
      if (cached[i] != expected) c.mismatch(i, double_string(expected), double_string(cached[i]));
    }
  }

  std::vector<float> fresh(3, 1.0f);
  const herd::TensorView fresh_view{fresh.data(), DataType::kFloat32, {3}};
  std::vector<std::string> reasons;
  if (rank != 1) {
    const auto start = std::chrono::steady_clock::now();
    const herd::Handle cached_handle =
        herd::allreduce_async("stall/cached", cached_view, cached_view, ReduceOp::kSum);
    const herd::Handle fresh_handle =
        herd::allreduce_async("stall/fresh", fresh_view, fresh_view, ReduceOp::kSum);
    reasons.push_back(
        failure_reason(rec, "stall/cached waits", "allreduce 'stall/cached'", cached_handle));
    reasons.push_back(
        failure_reason(rec, "stall/fresh waits", "allreduce 'stall/fresh'", fresh_handle));
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rec.check(elapsed >= kShutdownSeconds, "bound",
              "failed after " + std::to_string(elapsed) + " s, before HERD_STALL_SHUTDOWN_TIME");
    rec.check(elapsed < kShutdownSeconds + kSlackSeconds, "bound",
              "failed only after " + std::to_string(elapsed) + " s");
  }
  // Rank 1 waits here for the others' failures.
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string reason = from_rank_0(reasons.empty() ? "" : reasons.front());

  std::vector<int> waiting;
  for (int r = 0; r < size; ++r) {
    if (r != 1) waiting.push_back(r);
  }
  std::string waiting_list;
  for (int r : waiting) waiting_list += (waiting_list.empty() ? "" : ", ") + std::to_string(r);
  const std::string expected =
      "herd stopped: tensors waited longer than HERD_STALL_SHUTDOWN_TIME for ranks that did not "
      "submit them: rank 1 has not submitted allreduce 'stall/cached' (ranks [" +
      waiting_list + "] have waited _ s), allreduce 'stall/fresh' (ranks [" + waiting_list +
      "] have waited _ s)";
  std::vector<double> waits;
  rec.check(without_waits(reason, &waits) == expected, "text",
            "expected \"" + expected + "\" (with the waits), actual \"" + reason + "\"");
  for (double wait : waits) {
    // Rounded to 0.1 s: the later name may be just short of the limit.
    rec.check(wait >= kShutdownSeconds - 0.1 && wait < kShutdownSeconds + kSlackSeconds, "waits",
              "a wait of " + std::to_string(wait) + " s in \"" + reason + "\"");
  }
  for (const std::string& mine : reasons) {
    rec.check(mine == reason, "same text", "rank 0: \"" + reason + "\", here: \"" + mine + "\"");
  }

  // Rank 1's set has stopped with the same reason.
  if (rank == 1) {
    try {
      const herd::Handle late =
          herd::allreduce_async("stall/fresh", fresh_view, fresh_view, ReduceOp::kSum);
      const std::string mine = failure_reason(rec, "late", "allreduce 'stall/fresh'", late);
      rec.check(mine == reason, "late", "rank 0: \"" + reason + "\", rank 1: \"" + mine + "\"");
    } catch (const herd::Error& e) {
      rec.check(e.what() == "allreduce 'stall/fresh': " + reason, "late",
                std::string("submission threw \"") + e.what() + "\"");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_stall", world.rank);
  rec.check(world.provided == MPI_THREAD_MULTIPLE, "mpi", "MPI_THREAD_MULTIPLE not provided");
  try {
    herd::init();
    if (world.size > 1) test_stall(rec, world.rank, world.size);
    herd::shutdown();
    rec.pass();
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
