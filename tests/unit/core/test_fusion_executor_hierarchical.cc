// FusionExecutor with a hierarchical path (a set across hosts), threads as
// ranks: 2 hosts of 2 ranks, each host a shared-memory group over one heap
// area, each local rank's peers on the other host an in-process fabric, and
// the set's own fabric for the flat algorithms. Which path ran shows in
// which transport carried the call: forced (HERD_HIERARCHICAL_ALLREDUCE=1),
// every call crosses the cross transports and none the set's, whatever the
// algorithm setting; under the fixed choice (shm) calls of 64 KiB and more
// take it and smaller ones the set's transport; under the measured choice it
// runs among the candidates. Sums and averages exact throughout, fused
// groups included; an average divides by the whole set's size.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/inproc/inproc_transport.h"
#include "src/fusion_executor.h"
#include "tests/unit/collectives/shm_heap_area.h"
#include "tests/unit/core/float32_entries.h"
#include "tests/unit/core/forwarding_transport.h"

namespace herd::detail {
namespace {

using testing::float32_entry;
using testing::float32_response;

constexpr int kHosts = 2;
constexpr int kLocalSize = 2;
constexpr int kRanks = kHosts * kLocalSize;

// Counts the bytes sent through `inner`.
class CountingTransport : public testing::ForwardingTransport {
 public:
  CountingTransport(std::unique_ptr<collectives::Transport> inner, std::atomic<int64_t>& sent)
      : ForwardingTransport(std::move(inner)), sent_(sent) {}
  std::unique_ptr<collectives::PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                                      int tag) override {
    sent_ += static_cast<int64_t>(bytes);
    return ForwardingTransport::isend(data, bytes, peer, tag);
  }

 private:
  std::atomic<int64_t>& sent_;
};

// Bytes sent by all ranks over the set's transport and over the cross
// transports.
struct Traffic {
  std::atomic<int64_t> flat{0};
  std::atomic<int64_t> cross{0};
};

// Runs body(rank, executor) on kRanks threads: rank h * kLocalSize + l is
// local rank l of host h; its executor has the set's transport and the
// hierarchical path (forced or not) and `algorithm`.
template <typename Body>
void run_set(bool forced, AllreduceAlgorithmSetting algorithm, Traffic& traffic, Body body) {
  const std::chrono::seconds timeout(30);
  const std::size_t slot_bytes = collectives::kDefaultShmSlotBytes;
  collectives::InprocFabric flat(kRanks, timeout);
  std::vector<std::unique_ptr<collectives::InprocFabric>> cross;
  for (int l = 0; l < kLocalSize; ++l) {
    cross.push_back(std::make_unique<collectives::InprocFabric>(kHosts, timeout));
  }
  std::vector<std::unique_ptr<collectives::testing::HeapArea>> areas;
  for (int h = 0; h < kHosts; ++h) {
    areas.push_back(std::make_unique<collectives::testing::HeapArea>(kLocalSize, slot_bytes));
  }
  std::vector<std::thread> threads;
  for (int h = 0; h < kHosts; ++h) {
    for (int l = 0; l < kLocalSize; ++l) {
      threads.emplace_back([&, h, l] {
        const int rank = h * kLocalSize + l;
        collectives::ShmAllreduceGroup local(l, areas[static_cast<std::size_t>(h)]->regions(),
                                             slot_bytes, timeout);
        CountingTransport set_transport(flat.transport(rank), traffic.flat);
        CountingTransport cross_transport(cross[static_cast<std::size_t>(l)]->transport(h),
                                          traffic.cross);
        HierarchicalPath path;
        path.group = {&local, &cross_transport};
        path.forced = forced;
        FusionExecutor executor(set_transport, collectives::AllreduceOptions{}, ShmPath{}, 0,
                                algorithm, path);
        body(rank, executor);
      });
    }
  }
  for (std::thread& thread : threads) thread.join();
}

// Rank r's input at i of call c: a multiple of the rank count plus 2r, so
// that sums over kRanks ranks and their averages are exact integers.
float input_value(int rank, int call, int64_t i) {
  return static_cast<float>(kRanks * ((i + call) % 37) + 2 * rank);
}
double sum_value(int call, int64_t i) {
  return static_cast<double>(kRanks) * kRanks * ((i + call) % 37) + kRanks * (kRanks - 1);
}

// One call of `counts` tensors (fused when several) on this rank; "" when
// every output holds the exact sum or average, else the first mismatch.
std::string reduce_and_check(FusionExecutor& executor, int rank, int call, ReduceOp op,
                             const std::vector<int64_t>& counts) {
  std::vector<std::vector<float>> inputs(counts.size());
  std::vector<std::vector<float>> outputs(counts.size());
  std::vector<TensorEntry> entries;
  int64_t total = 0;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    for (int64_t i = 0; i < counts[t]; ++i) inputs[t].push_back(input_value(rank, call, i));
    outputs[t].assign(inputs[t].size(), -1.0f);
    entries.push_back(float32_entry(inputs[t], outputs[t]));
    total += counts[t];
  }
  std::vector<TensorEntry*> group;
  for (TensorEntry& entry : entries) group.push_back(&entry);
  const Status status = executor.allreduce(float32_response(op, total), group);
  if (!status.is_ok()) return status.message();
  for (std::size_t t = 0; t < counts.size(); ++t) {
    for (int64_t i = 0; i < counts[t]; ++i) {
      const double sum = sum_value(call, i);
      const double expected = op == ReduceOp::kAverage ? sum / kRanks : sum;
      if (outputs[t][static_cast<std::size_t>(i)] != expected) {
        return "rank " + std::to_string(rank) + " call " + std::to_string(call) + " tensor " +
               std::to_string(t) + " index " + std::to_string(i) + ": " +
               std::to_string(outputs[t][static_cast<std::size_t>(i)]) +
               " != " + std::to_string(expected);
      }
    }
  }
  return "";
}

TEST_CASE("fusion executor: a forced hierarchical path runs every call, whatever the algorithm",
          "[hierarchical]") {
  const AllreduceAlgorithmSetting algorithm =
      GENERATE(AllreduceAlgorithmSetting::kShm, AllreduceAlgorithmSetting::kRing,
               AllreduceAlgorithmSetting::kAuto);
  INFO("algorithm " << static_cast<int>(algorithm));
  Traffic traffic;
  std::vector<std::string> failures(kRanks);
  run_set(true, algorithm, traffic, [&](int rank, FusionExecutor& executor) {
    int call = 0;
    for (const std::vector<int64_t>& counts :
         std::vector<std::vector<int64_t>>{{1}, {3}, {1000}, {70000}, {5, 17, 300}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        std::string& failure = failures[static_cast<std::size_t>(rank)];
        if (failure.empty()) failure = reduce_and_check(executor, rank, call++, op, counts);
      }
    }
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  // No warm-up and no agreement either: nothing goes over the set's transport.
  CHECK(traffic.flat == 0);
  CHECK(traffic.cross > 0);
}

TEST_CASE("fusion executor: under the fixed choice the hierarchical path takes 64 KiB and more",
          "[hierarchical]") {
  const int64_t count =
      GENERATE(int64_t{1}, int64_t{4000}, int64_t{16383}, int64_t{16384}, int64_t{300000});
  const bool hierarchical = count * 4 >= static_cast<int64_t>(kHierarchicalAllreduceMinBytes);
  INFO(count << " elements");
  Traffic traffic;
  std::vector<std::string> failures(kRanks);
  run_set(false, AllreduceAlgorithmSetting::kShm, traffic, [&](int rank, FusionExecutor& executor) {
    for (int call = 0; call < 3; ++call) {
      std::string& failure = failures[static_cast<std::size_t>(rank)];
      if (failure.empty()) {
        failure = reduce_and_check(executor, rank, call, ReduceOp::kSum, {count});
      }
    }
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  CHECK((traffic.cross > 0) == hierarchical);
  CHECK((traffic.flat > 0) == !hierarchical);
}

TEST_CASE("fusion executor: the measured choice explores the hierarchical path", "[hierarchical]") {
  Traffic traffic;
  std::vector<std::string> failures(kRanks);
  run_set(
      false, AllreduceAlgorithmSetting::kAuto, traffic, [&](int rank, FusionExecutor& executor) {
        // Past the exploration and the first probe round of each size.
        for (int call = 0; call < 24; ++call) {
          for (int64_t count : {int64_t{2}, int64_t{5000}, int64_t{70000}}) {
            std::string& failure = failures[static_cast<std::size_t>(rank)];
            if (failure.empty()) {
              failure =
                  reduce_and_check(executor, rank, call,
                                   call % 2 == 0 ? ReduceOp::kSum : ReduceOp::kAverage, {count});
            }
          }
        }
      });
  for (const std::string& failure : failures) CHECK(failure == "");
  CHECK(traffic.cross > 0);
  CHECK(traffic.flat > 0);
}

TEST_CASE("fusion executor: the shared-memory chunk setting reaches the hierarchical path's group",
          "[hierarchical]") {
  Traffic traffic;
  std::vector<std::size_t> chunks(kRanks);
  std::vector<int> on_local_group(kRanks, 0);
  run_set(false, AllreduceAlgorithmSetting::kShm, traffic, [&](int rank, FusionExecutor& executor) {
    executor.set_shm_chunk_bytes(64 * 1024);
    chunks[static_cast<std::size_t>(rank)] = executor.shm_chunk_bytes();
    on_local_group[static_cast<std::size_t>(rank)] =
        executor.shm_group() == executor.hierarchical().group.local &&
        executor.hierarchical().group.local->short_chunk_bytes() == 64 * 1024;
  });
  CHECK(chunks == std::vector<std::size_t>(kRanks, 64 * 1024));
  CHECK(on_local_group == std::vector<int>(kRanks, 1));
}

}  // namespace
}  // namespace herd::detail
