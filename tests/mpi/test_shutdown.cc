// Multi-rank test of herd::shutdown with work still pending.
//
// With several ranks, each rank submits a name no other rank submits
// ("orphan/rank<r>"), which can only end at shutdown, while a second thread
// blocks in wait() on it; a name every rank submits ("matched") must complete
// normally, and one submitted by every rank right before shutdown ("late")
// may end either way. After shutdown: the orphan's wait throws herd::Error
// containing "shut down", every handle polls true, and every API call
// throws herd::Error.
//
// herd initialized MPI here, so shutdown() finalizes it: this program uses no
// MPI afterwards and judges each rank alone (mpiexec fails if any rank does).
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

bool mentions_shut_down(const herd::Error& e) {
  return std::string(e.what()).find("shut down") != std::string::npos;
}

// `call` must throw herd::Error.
void expect_throws(Recorder& rec, const std::string& what, const std::function<void()>& call) {
  try {
    call();
    rec.fail("after shutdown", what + " did not throw");
  } catch (const herd::Error&) {
    rec.pass();
  } catch (const std::exception& e) {
    rec.fail("after shutdown", what + " threw a non-herd::Error: " + e.what());
  }
}

// Waiting on a handle whose operation ended with the shutdown error.
void expect_shut_down(Recorder& rec, const std::string& case_name, const herd::Handle& handle) {
  try {
    herd::wait(handle);
    rec.fail(case_name, "wait returned; expected a \"shut down\" herd::Error");
  } catch (const herd::Error& e) {
    rec.check(mentions_shut_down(e), case_name,
              std::string("message lacks \"shut down\": \"") + e.what() + "\"");
  }
}

}  // namespace

int main() {
  try {
    herd::init();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "test_shutdown: herd::init threw: %s\n", e.what());
    return 1;
  }
  const int rank = herd::rank();
  const int size = herd::size();
  Recorder rec("test_shutdown", rank);

  // matched: float64 [5], sum of rank + i = size*(size-1)/2 + size*i.
  std::vector<double> matched(5);
  for (int i = 0; i < 5; ++i) matched[i] = rank + i;
  const herd::TensorView matched_view{matched.data(), DataType::kFloat64, {5}};
  std::vector<float> orphan(3, 1.0f);
  const herd::TensorView orphan_view{orphan.data(), DataType::kFloat32, {3}};
  std::vector<float> late(1000, static_cast<float>(rank + 1));
  const herd::TensorView late_view{late.data(), DataType::kFloat32, {10, 100}};

  herd::Handle matched_handle;
  herd::Handle orphan_handle;
  herd::Handle late_handle;
  std::thread waiter;
  bool waiter_saw_shut_down = false;
  std::string waiter_result = "did not run";
  try {
    if (size > 1) {
      orphan_handle = herd::allreduce_async("orphan/rank" + std::to_string(rank), orphan_view,
                                            orphan_view, ReduceOp::kSum);
      waiter = std::thread([&] {
        try {
          herd::wait(orphan_handle);
          waiter_result = "wait returned normally";
        } catch (const herd::Error& e) {
          waiter_saw_shut_down = mentions_shut_down(e);
          waiter_result = std::string("threw \"") + e.what() + "\"";
        }
      });
    }
    matched_handle = herd::allreduce_async("matched", matched_view, matched_view, ReduceOp::kSum);
    herd::wait(matched_handle);
    CaseCheck c(rec, "matched");
    for (int i = 0; i < 5; ++i) {
      const double expected = size * (size - 1) / 2.0 + static_cast<double>(size) * i;
      if (matched[i] != expected) c.mismatch(i, double_string(expected), double_string(matched[i]));
    }
    c.done();
    if (size > 1) {
      rec.check(!herd::poll(orphan_handle), "orphan before shutdown",
                "poll is true; nobody else sent it");
    }
    late_handle = herd::allreduce_async("late", late_view, late_view, ReduceOp::kSum);
  } catch (const herd::Error& e) {
    rec.fail("before shutdown", std::string("threw: ") + e.what());
  }

  // Any rank's shutdown ends every rank's loop at once, so the checks above
  // must be done everywhere before the first rank shuts down.
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    herd::shutdown();
    rec.pass();
  } catch (const herd::Error& e) {
    rec.fail("shutdown", std::string("threw: ") + e.what());
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  rec.check(finalized != 0, "shutdown", "herd initialized MPI but did not finalize it");

  if (waiter.joinable()) {
    waiter.join();
    rec.check(waiter_saw_shut_down, "orphan, waiting thread",
              "wait blocked at shutdown should throw \"shut down\"; it " + waiter_result);
    rec.check(herd::poll(orphan_handle), "orphan after shutdown", "poll is false");
    expect_shut_down(rec, "orphan after shutdown", orphan_handle);
    expect_shut_down(rec, "orphan after shutdown, waited again", orphan_handle);
  }
  if (matched_handle.valid()) {
    rec.check(herd::poll(matched_handle), "matched after shutdown", "poll is false");
    try {
      herd::wait(matched_handle);
      rec.pass();
    } catch (const herd::Error& e) {
      rec.fail("matched after shutdown", std::string("wait threw: ") + e.what());
    }
  }
  if (late_handle.valid()) {
    // Completed before the shutdown took effect, or failed with "shut down".
    rec.check(herd::poll(late_handle), "late after shutdown", "poll is false");
    try {
      herd::wait(late_handle);
      CaseCheck c(rec, "late, completed");
      for (int i = 0; i < 1000; ++i) {
        const double expected = size * (size + 1) / 2.0;
        if (late[i] != expected) c.mismatch(i, double_string(expected), double_string(late[i]));
      }
    } catch (const herd::Error& e) {
      rec.check(mentions_shut_down(e), "late, failed",
                std::string("message lacks \"shut down\": \"") + e.what() + "\"");
    }
  }

  try {
    rec.check(!herd::is_initialized(), "after shutdown", "is_initialized() is true");
  } catch (const herd::Error&) {
    rec.pass();  // throwing, like every other call, is acceptable too
  }
  expect_throws(rec, "rank()", [] { herd::rank(); });
  expect_throws(rec, "size()", [] { herd::size(); });
  expect_throws(rec, "local_rank()", [] { herd::local_rank(); });
  expect_throws(rec, "local_size()", [] { herd::local_size(); });
  expect_throws(rec, "cross_rank()", [] { herd::cross_rank(); });
  expect_throws(rec, "cross_size()", [] { herd::cross_size(); });
  expect_throws(rec, "mpi_threads_supported()", [] { herd::mpi_threads_supported(); });
  expect_throws(rec, "allreduce_async()", [&] {
    herd::allreduce_async("after", matched_view, matched_view, ReduceOp::kSum);
  });
  expect_throws(rec, "allreduce()",
                [&] { herd::allreduce("after", matched_view, matched_view, ReduceOp::kSum); });
  expect_throws(rec, "shutdown() again", [] { herd::shutdown(); });
  // MPI cannot start twice in one process: init again must fail cleanly (or,
  // if herd manages it, work and shut down again).
  try {
    herd::init();
    herd::shutdown();
    rec.pass();
  } catch (const herd::Error&) {
    rec.pass();
  }
  return rec.finish();
}
