// Multi-rank test of waiters driving the background loop (src/cycle_driver.h).
//
// Run with HERD_CYCLE_TIME=20000: the background thread, once idle, sleeps
// 20 s unless a submission wakes it. Blocking calls do not wake it (their
// caller runs the cycle), so:
//   - "blocking": 200 blocking allreduces, and a blocking broadcast, barrier
//     and grouped allreduce, each after a pause that lets the background
//     thread fall asleep, must all finish in far less than one cycle time;
//     if a blocking call ever depended on the background thread, one of them
//     would wait out the 20 s sleep and the case fails (and ctest's timeout
//     stops the run at 60 s).
//   - "threads": three threads at once: one makes blocking allreduces, one
//     submits asynchronous ones, and a third waits on those handles (a waiter
//     that did not submit drives too). Every result is checked exactly.
//   - "poll only": an asynchronous allreduce whose handle is only polled,
//     never waited on, submitted while another thread is in a blocking call:
//     nobody drives it, so the background thread must have been woken for it
//     (by the submission, or by the driver leaving work behind); it must
//     complete well within the cycle time.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
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
using Clock = std::chrono::steady_clock;

// Far below HERD_CYCLE_TIME (20 s), far above what the work takes here.
constexpr std::chrono::seconds kMuchLessThanACycle{8};
// Far longer than the background thread polls after a cycle (spin_wait.h).
constexpr std::chrono::milliseconds kPause{2};

// Rank r's element i of tensor `k`; the sum over p ranks is
// p * (i % 5 + 8 k) + p (p - 1) / 2, exact in float32.
float value(int rank, int64_t i, int k) { return static_cast<float>(i % 5 + 8 * k + rank); }
float expected_sum(int ranks, int64_t i, int k) {
  return static_cast<float>(ranks * (i % 5 + 8 * k) + ranks * (ranks - 1) / 2);
}

std::vector<float> input_for(int rank, int64_t count, int k) {
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[static_cast<std::size_t>(i)] = value(rank, i, k);
  return data;
}

void check_sum(CaseCheck& check, const std::vector<float>& output, int ranks, int k) {
  for (std::size_t i = 0; i < output.size(); ++i) {
    const float want = expected_sum(ranks, static_cast<int64_t>(i), k);
    if (output[i] != want) {
      check.mismatch(static_cast<int64_t>(i), std::to_string(want), std::to_string(output[i]));
    }
  }
}

TensorView view(std::vector<float>& data) {
  return TensorView{data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
}

void blocking_calls(Recorder& rec, int rank, int ranks) {
  const auto start = Clock::now();
  {
    CaseCheck check(rec, "blocking allreduces");
    for (int k = 0; k < 200; ++k) {
      // A pause first, so that the background thread, after polling briefly
      // for more work, is asleep when the call comes.
      std::this_thread::sleep_for(kPause);
      // Sizes through recursive doubling and the ring; names repeat, so most
      // are settled by the response cache.
      const int64_t count = k % 2 == 0 ? 7 : 70000;
      std::vector<float> input = input_for(rank, count, k % 3);
      std::vector<float> output(input.size(), -1.0f);
      herd::allreduce("blocking/" + std::to_string(k % 4), view(input), view(output),
                      ReduceOp::kSum);
      check_sum(check, output, ranks, k % 3);
    }
  }
  {
    std::this_thread::sleep_for(kPause);
    CaseCheck check(rec, "blocking broadcast");
    std::vector<float> data(1000, static_cast<float>(rank == ranks - 1 ? 42 : -1));
    herd::broadcast("blocking/broadcast", view(data), ranks - 1);
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (data[i] != 42.0f) check.mismatch(static_cast<int64_t>(i), "42", std::to_string(data[i]));
    }
  }
  std::this_thread::sleep_for(kPause);
  herd::barrier();
  {
    std::this_thread::sleep_for(kPause);
    CaseCheck check(rec, "blocking grouped allreduce");
    std::vector<float> a = input_for(rank, 10, 1), b = input_for(rank, 3000, 2);
    std::vector<float> a_out(a.size()), b_out(b.size());
    herd::grouped_allreduce({"blocking/group/a", "blocking/group/b"}, {view(a), view(b)},
                            {view(a_out), view(b_out)}, ReduceOp::kSum);
    check_sum(check, a_out, ranks, 1);
    check_sum(check, b_out, ranks, 2);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  rec.check(took < kMuchLessThanACycle, "blocking",
            "blocking calls took " + std::to_string(took.count()) +
                " ms: one of them waited for the sleeping background thread");
}

void three_threads(Recorder& rec, int rank, int ranks) {
  constexpr int kOps = 60;
  std::vector<std::vector<float>> async_in(kOps), async_out(kOps);
  std::vector<herd::Handle> handles(kOps);
  std::atomic<int> submitted{0};

  std::thread blocking([&] {
    CaseCheck check(rec, "threads: blocking");
    for (int k = 0; k < kOps; ++k) {
      std::vector<float> input = input_for(rank, 5000, k % 7);
      std::vector<float> output(input.size(), -1.0f);
      herd::allreduce("threads/blocking", view(input), view(output), ReduceOp::kSum);
      check_sum(check, output, ranks, k % 7);
    }
  });
  std::thread submitter([&] {
    for (int k = 0; k < kOps; ++k) {
      async_in[k] = input_for(rank, 300 + k, k % 7);
      async_out[k].assign(async_in[k].size(), -1.0f);
      handles[k] = herd::allreduce_async("threads/async/" + std::to_string(k), view(async_in[k]),
                                         view(async_out[k]), ReduceOp::kSum);
      submitted.store(k + 1, std::memory_order_release);
    }
  });
  std::thread waiter([&] {
    CaseCheck check(rec, "threads: waited by another thread");
    for (int k = 0; k < kOps; ++k) {
      while (submitted.load(std::memory_order_acquire) <= k) std::this_thread::yield();
      herd::wait(handles[k]);
      check_sum(check, async_out[k], ranks, k % 7);
    }
  });
  blocking.join();
  submitter.join();
  waiter.join();
}

void poll_only(Recorder& rec, int rank, int ranks) {
  CaseCheck check(rec, "poll only");
  std::vector<float> input = input_for(rank, 4000, 3), output(input.size(), -1.0f);
  std::thread blocking([&] {
    std::vector<float> in = input_for(rank, 100, 0), out(in.size());
    herd::allreduce("poll/blocking", view(in), view(out), ReduceOp::kSum);
  });
  const herd::Handle handle =
      herd::allreduce_async("poll/async", view(input), view(output), ReduceOp::kSum);
  const auto start = Clock::now();
  while (!herd::poll(handle) && Clock::now() - start < kMuchLessThanACycle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  blocking.join();
  if (!herd::poll(handle)) {
    check.fail("an allreduce nobody waits on did not complete in " +
               std::to_string(kMuchLessThanACycle.count()) + " s");
    herd::wait(handle);  // let it finish before its buffers go
    return;
  }
  herd::wait(handle);
  check_sum(check, output, ranks, 3);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Recorder rec("test_caller_drives", rank);
  try {
    herd::init();
    blocking_calls(rec, rank, ranks);
    three_threads(rec, rank, ranks);
    poll_only(rec, rank, ranks);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("run", std::string("exception: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
