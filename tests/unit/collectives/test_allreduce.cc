// Ring and recursive-doubling allreduce over the in-process fabric: every
// rank count 1..9 and 15, counts from 0 to 65539 (fewer than the ranks, not
// divisible by them), segments of one element up to the default (the
// smallest over the largest count at 2 to 4 ranks only), with
// rank-unique inputs and closed-form expected values; bit-identical results
// for non-associative float sums; the algorithm choice; and the errors a
// missing or mismatched rank produces.
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/allreduce.h"
#include "collectives/inproc/inproc_transport.h"
#include "collectives_test_util.h"

namespace herd::collectives {
namespace {

using testing::AllreduceFn;
using testing::first_difference_from_rank0;
using testing::first_mismatch;
using testing::run_allreduce;

const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15};
const std::vector<int64_t> kCounts = {0, 1, 2, 3, 7, 100, 1000, 10000, 65539};
// One float, five floats, and the default.
const std::vector<std::size_t> kSegmentBytes = {4, 20, kDefaultSegmentBytes};

AllreduceFn ring(std::size_t segment_bytes) {
  return [segment_bytes](void* buf, int64_t count, std::size_t element_size,
                         const ops::ReduceFn& reduce, Transport& transport) {
    return ring_allreduce(buf, count, element_size, reduce, transport, segment_bytes);
  };
}

AllreduceFn recursive_doubling() {
  return [](void* buf, int64_t count, std::size_t element_size, const ops::ReduceFn& reduce,
            Transport& transport) {
    return recursive_doubling_allreduce(buf, count, element_size, reduce, transport);
  };
}

// input[i] = (r + 1) + (i % 7) on rank r: small integers, so the float sum is
// exact in any order and equals p(p + 1)/2 + p * (i % 7).
std::string check_float_sum(int p, int64_t count, const AllreduceFn& algorithm) {
  const auto results = run_allreduce<float>(
      p, count, [](int rank, int64_t i) { return static_cast<float>(rank + 1 + i % 7); },
      testing::float_sum(), algorithm);
  return first_mismatch<float>(
      results, [p](int64_t i) { return static_cast<float>(p * (p + 1) / 2 + p * (i % 7)); });
}

// A rank-unique int32 in [-105, 105], and its maximum and minimum over ranks.
int32_t spread_value(int rank, int64_t i) {
  return static_cast<int32_t>((i * 37 + rank * 101) % 211) - 105;
}
int32_t spread_extreme(int p, int64_t i, bool want_max) {
  int32_t extreme = spread_value(0, i);
  for (int rank = 1; rank < p; ++rank) {
    const int32_t value = spread_value(rank, i);
    extreme = want_max ? std::max(extreme, value) : std::min(extreme, value);
  }
  return extreme;
}

std::string check_int32_extreme(int p, int64_t count, const AllreduceFn& algorithm, bool want_max) {
  const auto results = run_allreduce<int32_t>(
      p, count, spread_value, want_max ? testing::int32_max() : testing::int32_min(), algorithm);
  return first_mismatch<int32_t>(
      results, [p, want_max](int64_t i) { return spread_extreme(p, i, want_max); });
}

TEST_CASE("ring allreduce sums float32 for every rank count, count and segment size",
          "[allreduce][ring][sweep]") {
  for (int p : kRankCounts) {
    for (int64_t count : kCounts) {
      for (std::size_t segment_bytes : kSegmentBytes) {
        if (!testing::ring_sweep_case(p, count, segment_bytes, kDefaultSegmentBytes)) continue;
        CAPTURE(p, count, segment_bytes);
        CHECK(check_float_sum(p, count, ring(segment_bytes)) == "");
      }
    }
  }
}

TEST_CASE("ring allreduce takes int32 max and min", "[allreduce][ring][sweep]") {
  for (int p : kRankCounts) {
    for (int64_t count : kCounts) {
      for (std::size_t segment_bytes : kSegmentBytes) {
        if (!testing::ring_sweep_case(p, count, segment_bytes, kDefaultSegmentBytes)) continue;
        CAPTURE(p, count, segment_bytes);
        CHECK(check_int32_extreme(p, count, ring(segment_bytes), true) == "");
        CHECK(check_int32_extreme(p, count, ring(segment_bytes), false) == "");
      }
    }
  }
}

TEST_CASE("ring allreduce rounds a segment down to whole elements, at least one",
          "[allreduce][ring]") {
  for (std::size_t segment_bytes : {std::size_t{0}, std::size_t{1}, std::size_t{6}}) {
    CAPTURE(segment_bytes);
    CHECK(check_float_sum(3, 10, ring(segment_bytes)) == "");
  }
}

TEST_CASE("recursive doubling allreduce sums float32 for every rank count and count",
          "[allreduce][recursive_doubling]") {
  for (int p : kRankCounts) {
    for (int64_t count : kCounts) {
      CAPTURE(p, count);
      CHECK(check_float_sum(p, count, recursive_doubling()) == "");
    }
  }
}

TEST_CASE("recursive doubling allreduce takes int32 max and min",
          "[allreduce][recursive_doubling]") {
  for (int p : kRankCounts) {
    for (int64_t count : kCounts) {
      CAPTURE(p, count);
      CHECK(check_int32_extreme(p, count, recursive_doubling(), true) == "");
      CHECK(check_int32_extreme(p, count, recursive_doubling(), false) == "");
    }
  }
}

TEST_CASE("allreduce of float sums of non-integers is bit-identical on every rank",
          "[allreduce][sweep]") {
  // Values whose float sums depend on the order of the additions.
  auto input = [](int rank, int64_t i) {
    return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * 100.0 / 3.0);
  };
  const std::vector<std::pair<std::string, AllreduceFn>> algorithms = {
      {"ring, 20-byte segments", ring(20)},
      {"ring, default segments", ring(kDefaultSegmentBytes)},
      {"recursive doubling", recursive_doubling()}};
  for (const auto& [name, algorithm] : algorithms) {
    for (int p : kRankCounts) {
      for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{65539}}) {
        CAPTURE(name, p, count);
        const auto results = run_allreduce<float>(p, count, input, testing::float_sum(), algorithm);
        for (const auto& result : results) REQUIRE(result.status.message() == "");
        CHECK(first_difference_from_rank0(results) == "");
        // And close to the exact sum.
        int64_t far_off = 0;
        for (int64_t i = 0; i < count; ++i) {
          double exact = 0;
          for (int rank = 0; rank < p; ++rank) exact += input(rank, i);
          if (std::abs(results[0].data[static_cast<std::size_t>(i)] - exact) > 1e-3) ++far_off;
        }
        CHECK(far_off == 0);
      }
    }
  }
}

TEST_CASE("choose_allreduce_algorithm picks recursive doubling up to the threshold",
          "[allreduce]") {
  AllreduceOptions options;
  options.small_message_threshold_bytes = 1024;
  CHECK(choose_allreduce_algorithm(0, 4, options) == AllreduceAlgorithm::kRecursiveDoubling);
  CHECK(choose_allreduce_algorithm(1024, 4, options) == AllreduceAlgorithm::kRecursiveDoubling);
  CHECK(choose_allreduce_algorithm(1025, 4, options) == AllreduceAlgorithm::kRing);
  CHECK(choose_allreduce_algorithm(1024, 1, options) == AllreduceAlgorithm::kRing);
  CHECK(choose_allreduce_algorithm(1024, 2, options) == AllreduceAlgorithm::kRecursiveDoubling);
  options.small_message_threshold_bytes = 0;
  CHECK(choose_allreduce_algorithm(0, 4, options) == AllreduceAlgorithm::kRing);
  CHECK(choose_allreduce_algorithm(1, 4, options) == AllreduceAlgorithm::kRing);
  const AllreduceOptions defaults;
  CHECK(choose_allreduce_algorithm(64 << 10, 8, defaults) ==
        AllreduceAlgorithm::kRecursiveDoubling);
  CHECK(choose_allreduce_algorithm((64 << 10) + 1, 8, defaults) == AllreduceAlgorithm::kRing);
  CHECK(choose_allreduce_algorithm((64 << 10) + 1, 9, defaults) ==
        AllreduceAlgorithm::kRecursiveDoubling);
}

TEST_CASE("the default recursive doubling threshold grows with the rank count", "[allreduce]") {
  // The steps of docs/performance.md's table, at both ends of each.
  const std::vector<std::pair<int, std::size_t>> expected = {
      {2, 64 << 10},   {8, 64 << 10},   {9, 256 << 10},   {32, 256 << 10}, {33, 512 << 10},
      {64, 512 << 10}, {65, 1 << 20},   {256, 1 << 20},   {257, 2 << 20},  {512, 2 << 20},
      {513, 4 << 20},  {1024, 4 << 20}, {100000, 4 << 20}};
  for (const auto& [ranks, bytes] : expected) {
    INFO(ranks << " ranks");
    CHECK(small_allreduce_threshold(ranks) == bytes);
  }
}

// Sends of each rank when allreduce() runs on p ranks with `options`.
std::vector<int64_t> sends_per_rank(int p, int64_t count, const AllreduceOptions& options,
                                    std::string* failure) {
  std::vector<int64_t> sends(static_cast<std::size_t>(p));
  const auto results = run_allreduce<float>(
      p, count, [](int rank, int64_t i) { return static_cast<float>(rank + 1 + i % 7); },
      testing::float_sum(),
      [&](void* buf, int64_t n, std::size_t element_size, const ops::ReduceFn& reduce,
          Transport& transport) {
        testing::CountingTransport counting(transport);
        Status status = allreduce(buf, n, element_size, reduce, counting, options);
        sends[static_cast<std::size_t>(transport.rank())] = counting.sends();
        return status;
      });
  *failure = first_mismatch<float>(
      results, [p](int64_t i) { return static_cast<float>(p * (p + 1) / 2 + p * (i % 7)); });
  return sends;
}

TEST_CASE("allreduce runs the algorithm choose_allreduce_algorithm picks", "[allreduce]") {
  std::string failure;
  AllreduceOptions options;
  options.small_message_threshold_bytes = 64;  // 16 floats
  // Recursive doubling on 4 ranks: log2(4) = 2 exchanges each.
  CHECK(sends_per_rank(4, 16, options, &failure) == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(failure == "");
  // Ring on 4 ranks, one segment per chunk: 2 (p - 1) = 6 sends each.
  CHECK(sends_per_rank(4, 17, options, &failure) == std::vector<int64_t>{6, 6, 6, 6});
  CHECK(failure == "");
  // Recursive doubling on 3 ranks: rank 0 folds into rank 1, which exchanges
  // with rank 2 and sends the result back to rank 0.
  CHECK(sends_per_rank(3, 16, options, &failure) == std::vector<int64_t>{1, 2, 1});
  CHECK(failure == "");
  options.small_message_threshold_bytes = 0;
  CHECK(sends_per_rank(4, 4, options, &failure) == std::vector<int64_t>{6, 6, 6, 6});
  CHECK(failure == "");
  // Nothing to send: one rank, or no elements.
  CHECK(sends_per_rank(1, 100, options, &failure) == std::vector<int64_t>{0});
  CHECK(sends_per_rank(3, 0, options, &failure) == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("ring allreduce sends each chunk as segments of segment_bytes", "[allreduce][ring]") {
  // 7 floats on 3 ranks: chunks of 3, 2, 2. Rank 0 sends chunks 1 and 2 to
  // their owners in the reduce-scatter and chunks 0 and 2 around the ring in
  // the allgather.
  std::string failure;
  AllreduceOptions options;
  options.small_message_threshold_bytes = 0;
  options.segment_bytes = 8;  // 2 floats: chunk 0 is two segments, the others one
  CHECK(sends_per_rank(3, 7, options, &failure)[0] == 5);
  CHECK(failure == "");
  options.segment_bytes = 6;  // rounds down to 1 float: one segment per element
  CHECK(sends_per_rank(3, 7, options, &failure)[0] == 9);
  CHECK(failure == "");
}

// Runs `algorithm` on every rank of a fabric with a short timeout except
// `absent`, which never calls; returns each rank's Status message.
std::vector<std::string> run_without_rank(int p, int absent, int64_t count,
                                          const AllreduceFn& algorithm) {
  InprocFabric fabric(p, std::chrono::milliseconds(200));
  std::vector<std::string> messages(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    if (rank == absent) continue;
    threads.emplace_back([&, rank, transport = fabric.transport(rank)] {
      std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
      const Status status =
          algorithm(data.data(), count, sizeof(float), testing::float_sum(), *transport);
      messages[static_cast<std::size_t>(rank)] = status.message();
    });
  }
  for (auto& thread : threads) thread.join();
  return messages;
}

TEST_CASE("ring allreduce with a missing rank fails naming the phase, step, rank and peer",
          "[allreduce][ring][errors]") {
  const auto messages = run_without_rank(3, 2, 30, ring(kDefaultSegmentBytes));
  // Ranks 0 and 1 get their chunk's first segment from each other, then
  // wait for the missing rank 2's.
  CHECK_THAT(messages[0], Catch::StartsWith("ring allreduce reduce-scatter step 0 (rank 0, "
                                            "recv from 2): "));
  CHECK_THAT(messages[0], Catch::Contains("from rank 2 to rank 0"));
  CHECK_THAT(messages[1], Catch::StartsWith("ring allreduce reduce-scatter step 0 (rank 1, "
                                            "recv from 2): "));
}

TEST_CASE("recursive doubling allreduce with a missing rank fails naming the phase and peer",
          "[allreduce][recursive_doubling][errors]") {
  // 3 ranks: rank 0 folds into rank 1 (missing), rank 2 exchanges with it.
  const auto messages = run_without_rank(3, 1, 5, recursive_doubling());
  CHECK_THAT(messages[0], Catch::StartsWith("recursive doubling allreduce fold-out step 0 "
                                            "(rank 0, recv from 1): "));
  CHECK_THAT(messages[2], Catch::StartsWith("recursive doubling allreduce exchange step 0 "
                                            "(rank 2, recv from 1): "));
}

TEST_CASE("allreduce with counts that differ between ranks fails with both lengths",
          "[allreduce][errors]") {
  for (const auto& algorithm : {ring(kDefaultSegmentBytes), recursive_doubling()}) {
    InprocFabric fabric(2, std::chrono::milliseconds(200));
    std::vector<std::string> messages(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank, transport = fabric.transport(rank)] {
        const int64_t count = rank == 0 ? 10 : 12;
        std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
        const Status status =
            algorithm(data.data(), count, sizeof(float), testing::float_sum(), *transport);
        messages[static_cast<std::size_t>(rank)] = status.message();
      });
    }
    for (auto& thread : threads) thread.join();
    // Rank 1 expects 24-byte (ring chunk) or 48-byte messages and gets 20 or 40.
    CHECK_THAT(messages[1], Catch::Contains("(rank 1, recv from 0)") &&
                                Catch::Contains("expected") && Catch::Contains("got a message"));
    CHECK(messages[0] != "");
  }
}

// Hidden (run with `test_collectives "[large]"`): more than 2^31 one-byte
// elements on 2 ranks: about 14 GB of memory and 40 s.
TEST_CASE("allreduce of more than 2^31 elements", "[.][large][allreduce]") {
  const int64_t count = (int64_t{1} << 31) + 5;
  const auto uint8_sum =
      testing::elementwise<uint8_t>([](uint8_t a, uint8_t b) { return uint8_t(a + b); });
  auto input = [](int rank, int64_t i) { return static_cast<uint8_t>((i + rank) % 7); };
  auto expected = [](int64_t i) { return static_cast<uint8_t>(i % 7 + (i + 1) % 7); };
  for (const auto& [name, algorithm] : std::vector<std::pair<std::string, AllreduceFn>>{
           {"ring", ring(kDefaultSegmentBytes)}, {"recursive doubling", recursive_doubling()}}) {
    CAPTURE(name);
    const auto results = run_allreduce<uint8_t>(2, count, input, uint8_sum, algorithm);
    // uint8_t prints as a character; compare the values as ints.
    std::string failure;
    for (std::size_t rank = 0; rank < results.size() && failure.empty(); ++rank) {
      if (!results[rank].status.is_ok()) failure = results[rank].status.message();
      for (int64_t i = 0; i < count && failure.empty(); ++i) {
        const int actual = results[rank].data[static_cast<std::size_t>(i)];
        if (actual != expected(i)) {
          failure = "rank " + std::to_string(rank) + " index " + std::to_string(i) + ": expected " +
                    std::to_string(expected(i)) + ", actual " + std::to_string(actual);
        }
      }
    }
    CHECK(failure == "");
  }
}

}  // namespace
}  // namespace herd::collectives

namespace herd::collectives {
namespace {

// Out of place with a finish step, through allreduce() with the threshold
// forcing each algorithm: output[i] must be finish(sum) exactly, the input
// must be untouched, and finish must run once per element (it adds 1000, so
// twice or never shows). Inputs as in check_float_sum.
std::string check_out_of_place(int p, int64_t count, std::size_t segment_bytes,
                               std::size_t small_threshold) {
  std::vector<std::vector<float>> inputs(static_cast<std::size_t>(p));
  std::vector<std::vector<float>> outputs(static_cast<std::size_t>(p));
  std::vector<Status> statuses(static_cast<std::size_t>(p));
  AllreduceOptions options;
  options.segment_bytes = segment_bytes;
  options.small_message_threshold_bytes = small_threshold;
  run_inproc_ranks(p, [&](int rank, Transport& transport) {
    std::vector<float>& input = inputs[static_cast<std::size_t>(rank)];
    std::vector<float>& output = outputs[static_cast<std::size_t>(rank)];
    for (int64_t i = 0; i < count; ++i) input.push_back(static_cast<float>(rank + 1 + i % 7));
    output.assign(static_cast<std::size_t>(count), -1.0f);
    const FinishFn add_1000 = [](void* data, int64_t n) {
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(data)[i] += 1000.0f;
    };
    statuses[static_cast<std::size_t>(rank)] =
        allreduce(input.data(), output.data(), count, sizeof(float), testing::float_sum(),
                  transport, options, add_1000);
  });
  for (int rank = 0; rank < p; ++rank) {
    const auto r = static_cast<std::size_t>(rank);
    if (!statuses[r].is_ok()) return statuses[r].message();
    for (int64_t i = 0; i < count; ++i) {
      const auto at = static_cast<std::size_t>(i);
      const float original = static_cast<float>(rank + 1 + i % 7);
      const float expected = static_cast<float>(p * (p + 1) / 2 + p * (i % 7)) + 1000.0f;
      if (inputs[r][at] != original) {
        return "rank " + std::to_string(rank) + " input[" + std::to_string(i) + "] changed to " +
               std::to_string(inputs[r][at]);
      }
      if (outputs[r][at] != expected) {
        return "rank " + std::to_string(rank) + " output[" + std::to_string(i) +
               "] = " + std::to_string(outputs[r][at]) + ", expected " + std::to_string(expected);
      }
    }
  }
  return "";
}

TEST_CASE("ring allreduce out of place finishes every element once, input untouched",
          "[allreduce][ring][sweep]") {
  for (int p : kRankCounts) {
    for (int64_t count : kCounts) {
      for (std::size_t segment_bytes : kSegmentBytes) {
        if (!testing::ring_sweep_case(p, count, segment_bytes, kDefaultSegmentBytes)) continue;
        CAPTURE(p, count, segment_bytes);
        CHECK(check_out_of_place(p, count, segment_bytes, 0) == "");
      }
    }
  }
}

TEST_CASE("recursive doubling allreduce out of place finishes every element once",
          "[allreduce][recursive_doubling]") {
  for (int p : kRankCounts) {
    for (int64_t count : kCounts) {
      CAPTURE(p, count);
      CHECK(check_out_of_place(p, count, kDefaultSegmentBytes, std::size_t{1} << 30) == "");
    }
  }
}

}  // namespace
}  // namespace herd::collectives
