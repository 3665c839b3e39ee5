// FusionExecutor's measured algorithm choice over the in-process transport:
// exact sums while the choice explores and switches between the ring and
// recursive doubling, and a failed agreement on the timings or warm-up
// failing the call on every rank, naming what was being done.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/inproc/inproc_transport.h"
#include "src/fusion_executor.h"
#include "tests/unit/core/float32_entries.h"
#include "tests/unit/core/forwarding_transport.h"

namespace herd::detail {
namespace {

using testing::float32_entry;
using testing::float32_response;

// A transfer that fails at wait().
class FailedTransfer : public collectives::PendingTransfer {
 public:
  Status wait() override { return Status::error("injected failure"); }
};

// Sends of `fail_bytes` bytes fail while armed (from the start); the rest
// pass through.
class FailingTransport : public testing::ForwardingTransport {
 public:
  FailingTransport(std::unique_ptr<collectives::Transport> inner, std::size_t fail_bytes)
      : ForwardingTransport(std::move(inner)), fail_bytes_(fail_bytes) {}
  void arm(bool armed) { armed_ = armed; }
  std::unique_ptr<collectives::PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                                      int tag) override {
    if (armed_ && bytes == fail_bytes_) return std::make_unique<FailedTransfer>();
    return ForwardingTransport::isend(data, bytes, peer, tag);
  }

 private:
  std::size_t fail_bytes_;
  bool armed_ = true;
};

// Runs body(rank, transport) for `size` ranks over one fabric, each on its
// own thread.
template <typename Body>
void run_ranks(int size, std::chrono::milliseconds timeout, std::size_t fail_bytes_on_rank1,
               Body body) {
  collectives::InprocFabric fabric(size, timeout);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<collectives::Transport> transport = fabric.transport(rank);
      if (rank == 1 && fail_bytes_on_rank1 > 0) {
        transport = std::make_unique<FailingTransport>(std::move(transport), fail_bytes_on_rank1);
      }
      body(rank, *transport);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST_CASE("fusion executor: exact sums while the measured choice explores and settles",
          "[chooser]") {
  const int p = GENERATE(2, 3);
  INFO(p << " ranks");
  // Sizes in several classes, each called past its exploration and its
  // first probe round; the inputs differ per call, so a result left over
  // from another call or algorithm shows.
  const std::vector<int64_t> counts = {1, 700, 1024, 5000};
  constexpr int kCalls = 24;
  std::vector<std::vector<std::string>> failures(static_cast<std::size_t>(p));
  run_ranks(p, std::chrono::seconds(30), 0, [&](int rank, collectives::Transport& transport) {
    FusionExecutor executor(transport, collectives::AllreduceOptions{});
    for (int call = 0; call < kCalls; ++call) {
      for (int64_t count : counts) {
        std::vector<float> input(static_cast<std::size_t>(count));
        for (int64_t i = 0; i < count; ++i)
          input[i] = static_cast<float>(rank * 100 + call + i % 9);
        std::vector<float> output(input.size(), -1.0f);
        TensorEntry entry = float32_entry(input, output);
        const Status status = executor.allreduce(float32_response(ReduceOp::kSum, count), {&entry});
        if (!status.is_ok()) {
          failures[rank].push_back(status.message());
          return;
        }
        for (int64_t i = 0; i < count; ++i) {
          // Sum over ranks r of r * 100 + call + i % 9.
          const double expected = 100.0 * p * (p - 1) / 2 + p * (call + i % 9);
          if (output[i] != expected) {
            failures[rank].push_back("call " + std::to_string(call) + " count " +
                                     std::to_string(count) + " index " + std::to_string(i) + ": " +
                                     std::to_string(output[i]) + " != " + std::to_string(expected));
            return;
          }
        }
      }
    }
  });
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(failures[rank].empty());
    if (!failures[rank].empty()) CHECK(failures[rank].front() == "");
  }
}

TEST_CASE("fusion executor: a failed agreement on the timings fails the call on every rank",
          "[chooser]") {
  // Two candidates (the ring, recursive doubling) at 2 ranks: the second call
  // of a size ends its exploration with the exchange of one double per path,
  // whose send fails on rank 1 (armed after the first call, whose warm-up
  // sends ring chunks of that size too); rank 0 then waits for it until the
  // fabric's timeout.
  std::vector<Status> second(2);
  std::vector<float> sums(2, 0.0f);
  run_ranks(2, std::chrono::milliseconds(500), kAllreducePaths * sizeof(double),
            [&](int rank, collectives::Transport& transport) {
              FusionExecutor executor(transport, collectives::AllreduceOptions{});
              auto* failing = dynamic_cast<FailingTransport*>(&transport);
              if (failing != nullptr) failing->arm(false);
              std::vector<float> input(1024, 1.0f), output(1024);
              TensorEntry entry = float32_entry(input, output);
              const Status first =
                  executor.allreduce(float32_response(ReduceOp::kSum, 1024), {&entry});
              if (!first.is_ok()) {
                second[rank] = Status::error("the first call failed: " + first.message());
                return;
              }
              if (failing != nullptr) failing->arm(true);
              second[rank] = executor.allreduce(float32_response(ReduceOp::kSum, 1024), {&entry});
              sums[rank] = output[1023];
            });
  const std::string context = "agreeing on the allreduce algorithm for 4096 bytes: ";
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << second[rank].message());
    REQUIRE_FALSE(second[rank].is_ok());
    CHECK(second[rank].message().rfind(context, 0) == 0);
  }
  CHECK(second[1].message().find("injected failure") != std::string::npos);
  // The call's own result was complete before the agreement.
  CHECK(sums == std::vector<float>{2.0f, 2.0f});
}

TEST_CASE("fusion executor: a failed warm-up fails the first call on every rank", "[chooser]") {
  // Before the first measured call every candidate runs twice on 64 bytes,
  // recursive doubling first at this size: rank 1's sends of 64 bytes fail.
  std::vector<Status> first(2);
  run_ranks(2, std::chrono::milliseconds(500), 64,
            [&](int rank, collectives::Transport& transport) {
              FusionExecutor executor(transport, collectives::AllreduceOptions{});
              std::vector<float> input(1024, 1.0f), output(1024);
              TensorEntry entry = float32_entry(input, output);
              first[rank] = executor.allreduce(float32_response(ReduceOp::kSum, 1024), {&entry});
            });
  const std::string context =
      "warming up the allreduce algorithms (RECURSIVE_DOUBLING_ALLREDUCE): ";
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << first[rank].message());
    REQUIRE_FALSE(first[rank].is_ok());
    CHECK(first[rank].message().rfind(context, 0) == 0);
  }
  CHECK(first[1].message().find("injected failure") != std::string::npos);
}

}  // namespace
}  // namespace herd::detail
