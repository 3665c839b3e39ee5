// The shared-memory allreduce (collectives/shm/shm_allreduce.h) with threads
// as ranks over one heap area: rank counts 1..8, counts from 0 past many
// chunks (fewer elements than ranks, shares not filling a cache line), slots
// of one cache line up to the default, in place and out of place, several
// calls in a row on one group, element sizes 1 to 8, `finish` applied once,
// bit-identical results for non-associative float sums, each element in the
// reduction order whatever share it falls in; and the two ways a
// call fails: a rank that never arrives (the stall timeout) and a rank whose
// process has exited. The single-copy path (process_vm_readv on this
// process's own pid) the same way, bit for bit, and its probe refused and a
// read failing mid-call.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "collectives/shm/shm_allreduce.h"
#include "collectives_test_util.h"
#include "reduction_order_reference.h"
#include "shm_heap_area.h"
#include "shm_thread_ranks.h"

namespace herd::collectives {
namespace {

using testing::elementwise;
using testing::float_sum;

using testing::HeapArea;
using testing::statuses_without_rank2;

// One call of a rank: what it reduces and where.
template <typename T>
struct RankCall {
  std::vector<T> input;
  std::vector<T> output;
  Status status;
};

// Runs `calls_per_rank` allreduces in a row on each of p thread-ranks sharing
// one group area; call c of rank r reduces count[c] elements of input(r, c, i).
template <typename T>
std::vector<std::vector<RankCall<T>>> run_shm(
    int p, std::size_t slot_bytes, const std::vector<int64_t>& counts, bool in_place,
    const std::function<T(int rank, int call, int64_t i)>& input, const ops::ReduceFn& reduce,
    const FinishFn& finish = {}, std::optional<ShmLineMode> mode = std::nullopt,
    std::size_t later_bytes = 0, std::size_t single_copy_min_bytes = SIZE_MAX) {
  HeapArea area(p, slot_bytes);
  std::vector<std::vector<RankCall<T>>> results(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    threads.emplace_back([&, rank] {
      ShmAllreduceGroup group(rank, area.regions(), slot_bytes, std::chrono::seconds(60), mode);
      group.set_single_copy_bytes(single_copy_min_bytes, SIZE_MAX);
      auto& mine = results[static_cast<std::size_t>(rank)];
      for (std::size_t c = 0; c < counts.size(); ++c) {
        RankCall<T> call;
        for (int64_t i = 0; i < counts[c]; ++i) {
          call.input.push_back(input(rank, static_cast<int>(c), i));
        }
        call.output.assign(call.input.size(), T{});
        if (in_place) call.output = call.input;
        void* out = call.output.data();
        const void* in = in_place ? out : call.input.data();
        call.status = group.allreduce(in, out, counts[c], sizeof(T), reduce, finish, later_bytes);
        mine.push_back(std::move(call));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

// "" when every rank's every call succeeded and holds expected(call, i).
template <typename T>
std::string first_mismatch(const std::vector<std::vector<RankCall<T>>>& results,
                           const std::function<T(int call, int64_t i)>& expected) {
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    for (std::size_t c = 0; c < results[rank].size(); ++c) {
      const RankCall<T>& call = results[rank][c];
      if (!call.status.is_ok()) {
        return fmt::format("rank {} call {} failed: {}", rank, c, call.status.message());
      }
      for (std::size_t i = 0; i < call.output.size(); ++i) {
        const T want = expected(static_cast<int>(c), static_cast<int64_t>(i));
        if (!(call.output[i] == want)) {
          return fmt::format("rank {} call {} index {} of {}: expected {}, actual {}", rank, c, i,
                             call.output.size(), static_cast<double>(want),
                             static_cast<double>(call.output[i]));
        }
      }
    }
  }
  return "";
}

// Small integers: exact in float whatever the order. Sum over p ranks of
// (r + 1) + (i + c) % 7 is p(p+1)/2 + p((i + c) % 7).
float small_value(int rank, int call, int64_t i) {
  return static_cast<float>(rank + 1 + (i + call) % 7);
}
float small_sum(int p, int call, int64_t i) {
  return static_cast<float>(p * (p + 1) / 2 + p * ((i + call) % 7));
}

TEST_CASE("shm allreduce sums float32 for every rank count, count and slot size",
          "[shm][allreduce][sweep]") {
  const std::vector<int64_t> counts = {0, 1, 2, 3, 15, 16, 17, 100, 1000, 65539};
  for (int p : {1, 2, 3, 4, 5, 8}) {
    // One cache line, three lines (shares of a line or none), the default.
    for (std::size_t slot_bytes : {std::size_t{64}, std::size_t{192}, kDefaultShmSlotBytes}) {
      for (bool in_place : {false, true}) {
        std::vector<int64_t> used;
        for (int64_t count : counts) {
          // Tiny slots on many ranks make thousands of barriers: keep them short.
          if (slot_bytes < 1024 && count > 1000) continue;
          used.push_back(count);
        }
        const auto results =
            run_shm<float>(p, slot_bytes, used, in_place, small_value, float_sum());
        INFO("p=" << p << " slot_bytes=" << slot_bytes << " in_place=" << in_place);
        CHECK(first_mismatch<float>(
                  results, [&](int call, int64_t i) { return small_sum(p, call, i); }) == "");
      }
    }
  }
}

TEST_CASE("shm allreduce gives the same results in both line modes and while rank 0 chooses",
          "[shm][allreduce]") {
  // 100003 floats: past the 64 KiB from which rank 0 chooses, so that the
  // eight calls in a row run both modes (line_mode.h).
  const std::vector<int64_t> counts(8, 100003);
  for (int p : {2, 3}) {
    for (const std::optional<ShmLineMode>& mode :
         {std::optional<ShmLineMode>{}, std::optional<ShmLineMode>{ShmLineMode::kKeep},
          std::optional<ShmLineMode>{ShmLineMode::kEvict}}) {
      INFO("p=" << p << " mode " << (mode ? static_cast<int>(*mode) : -1));
      const auto results =
          run_shm<float>(p, 4096, counts, false, small_value, float_sum(), {}, mode);
      CHECK(first_mismatch<float>(
                results, [&](int call, int64_t i) { return small_sum(p, call, i); }) == "");
    }
  }
}

TEST_CASE("shm allreduce: short chunks, whole slots when the output streams (8 MiB)",
          "[shm][allreduce]") {
  CHECK(shm_chunk_bytes(false, kDefaultShmSlotBytes) == kShmShortChunkBytes);
  CHECK(shm_chunk_bytes(true, kDefaultShmSlotBytes) == kDefaultShmSlotBytes);
  // A slot shorter than a short chunk bounds every chunk.
  CHECK(shm_chunk_bytes(false, 64) == 64);
  CHECK(shm_chunk_bytes(true, 64) == 64);
  // Both kinds of chunk in one group, one call after the other: 2^21 + 5
  // floats are just over 8 MiB.
  for (int p : {2, 3}) {
    const auto results =
        run_shm<float>(p, kDefaultShmSlotBytes, {(1 << 21) + 5, 1000, (1 << 21) + 5}, false,
                       small_value, float_sum());
    CHECK(first_mismatch<float>(results,
                                [&](int call, int64_t i) { return small_sum(p, call, i); }) == "");
  }
}

TEST_CASE("shm allreduce streams its output when it and what follows reach 8 MiB",
          "[shm][allreduce]") {
  CHECK_FALSE(shm_streams_output(kShmStreamingMinBytes - 1, 0));
  CHECK(shm_streams_output(kShmStreamingMinBytes, 0));
  CHECK(shm_streams_output(1 << 20, kShmStreamingMinBytes - (1 << 20)));
  CHECK_FALSE(shm_streams_output(1 << 20, kShmStreamingMinBytes - (1 << 20) - 1));
  CHECK(shm_streams_output(64, SIZE_MAX));  // no overflow
  CHECK_FALSE(shm_streams_output(0, SIZE_MAX));
  // Small buffers copied out with streaming stores, at every offset of a
  // cache line that a share can end on, in place and out of place.
  const std::vector<int64_t> counts = {1, 17, 1000, 65539};
  for (int p : {2, 3}) {
    for (bool in_place : {false, true}) {
      INFO("p=" << p << " in_place=" << in_place);
      const auto results = run_shm<float>(p, kDefaultShmSlotBytes, counts, in_place, small_value,
                                          float_sum(), {}, std::nullopt, SIZE_MAX);
      CHECK(first_mismatch<float>(
                results, [&](int call, int64_t i) { return small_sum(p, call, i); }) == "");
    }
  }
}

TEST_CASE("shm allreduce keeps an out-of-place input unchanged", "[shm][allreduce]") {
  const auto results = run_shm<float>(3, 256, {1000}, /*in_place=*/false, small_value, float_sum());
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    const RankCall<float>& call = results[rank][0];
    for (int64_t i = 0; i < 1000; ++i) {
      INFO("rank " << rank << " index " << i);
      REQUIRE(call.input[static_cast<std::size_t>(i)] == small_value(static_cast<int>(rank), 0, i));
    }
  }
}

TEST_CASE("shm allreduce computes max and min of int32 and sums of 1, 2 and 8-byte elements",
          "[shm][allreduce]") {
  const auto spread = [](int rank, int call, int64_t i) {
    return static_cast<int32_t>((i * 37 + rank * 101 + call) % 211) - 105;
  };
  for (int p : {2, 3, 5}) {
    for (bool want_max : {true, false}) {
      const auto reduce = want_max ? testing::int32_max() : testing::int32_min();
      const auto results = run_shm<int32_t>(p, 128, {1, 33, 5000}, false, spread, reduce);
      CHECK(first_mismatch<int32_t>(results, [&](int call, int64_t i) {
              int32_t extreme = spread(0, call, i);
              for (int r = 1; r < p; ++r) {
                extreme = want_max ? std::max(extreme, spread(r, call, i))
                                   : std::min(extreme, spread(r, call, i));
              }
              return extreme;
            }) == "");
    }
    // int8 wraps in two's complement: the expected value is the wrapped sum.
    const auto results8 = run_shm<int8_t>(
        p, 64, {1, 63, 64, 65, 999}, true,
        [](int rank, int, int64_t i) { return static_cast<int8_t>((i * 13 + rank * 7) % 100); },
        elementwise<int8_t>([](int8_t a, int8_t b) { return static_cast<int8_t>(a + b); }));
    CHECK(first_mismatch<int8_t>(results8, [p](int, int64_t i) {
            int sum = 0;
            for (int r = 0; r < p; ++r) sum += static_cast<int>((i * 13 + r * 7) % 100);
            return static_cast<int8_t>(sum);
          }) == "");
    const auto results16 = run_shm<int16_t>(
        p, 64, {31, 32, 33}, false,
        [](int rank, int, int64_t i) { return static_cast<int16_t>(i - rank); },
        elementwise<int16_t>([](int16_t a, int16_t b) { return static_cast<int16_t>(a + b); }));
    CHECK(first_mismatch<int16_t>(results16, [p](int, int64_t i) {
            return static_cast<int16_t>(p * i - p * (p - 1) / 2);
          }) == "");
    const auto results64 = run_shm<double>(
        p, 64, {7, 8, 9, 1001}, false,
        [](int rank, int, int64_t i) { return static_cast<double>(i) * 0.5 + rank; },
        elementwise<double>([](double a, double b) { return a + b; }));
    CHECK(first_mismatch<double>(results64, [p](int, int64_t i) {
            return static_cast<double>(i) * 0.5 * p + p * (p - 1) / 2.0;
          }) == "");
  }
}

TEST_CASE("shm allreduce applies finish exactly once to every element", "[shm][allreduce]") {
  for (int p : {1, 2, 4}) {
    std::atomic<int64_t> finished{0};
    const FinishFn halve_and_count = [&finished](void* data, int64_t count) {
      auto* values = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) values[i] *= 0.5f;
      finished += count;
    };
    const std::vector<int64_t> counts = {5, 1000, 70000};
    const auto results =
        run_shm<float>(p, 4096, counts, false, small_value, float_sum(), halve_and_count);
    CHECK(first_mismatch<float>(
              results, [p](int call, int64_t i) { return small_sum(p, call, i) * 0.5f; }) == "");
    // Each element is finished by the one rank that reduced it.
    CHECK(finished.load() == 5 + 1000 + 70000);
  }
}

TEST_CASE("shm allreduce gives every rank the same bits for a non-associative float sum",
          "[shm][allreduce]") {
  const auto noisy = [](int rank, int, int64_t i) {
    std::mt19937 generator(static_cast<uint32_t>(rank * 100003 + i));
    return std::uniform_real_distribution<float>(-1e6f, 1e6f)(generator) /
           static_cast<float>(1 + i % 13);
  };
  const auto results = run_shm<float>(5, 1024, {10007}, false, noisy, float_sum());
  for (std::size_t rank = 1; rank < results.size(); ++rank) {
    REQUIRE(results[rank][0].status.is_ok());
    for (std::size_t i = 0; i < results[rank][0].output.size(); ++i) {
      INFO("rank " << rank << " index " << i);
      REQUIRE(std::memcmp(&results[rank][0].output[i], &results[0][0].output[i], sizeof(float)) ==
              0);
    }
  }
}

TEST_CASE("shm allreduce reduces every element in the reduction order, whatever its share",
          "[shm][allreduce][reduction_order][sweep]") {
  // Shares of one cache line (slots of one and three lines), short chunks
  // and whole slots; the calls in a row shift where each index falls.
  const auto value = [](int rank, int, int64_t i) {
    return testing::order_sensitive_value(rank, i);
  };
  for (int p = 1; p <= 8; ++p) {
    for (std::size_t slot_bytes : {std::size_t{64}, std::size_t{192}, kDefaultShmSlotBytes}) {
      for (bool in_place : {false, true}) {
        const std::vector<int64_t> counts = slot_bytes < 1024
                                                ? std::vector<int64_t>{1, 17, 1001}
                                                : std::vector<int64_t>{1, 17, 1001, 100003};
        const auto results = run_shm<float>(p, slot_bytes, counts, in_place, value, float_sum());
        INFO("p=" << p << " slot_bytes=" << slot_bytes << " in_place=" << in_place);
        for (const auto& calls : results) {
          for (const auto& call : calls) {
            REQUIRE(call.status.message() == "");
            std::string difference;
            for (std::size_t i = 0; i < call.output.size() && difference.empty(); ++i) {
              const float want = testing::order_sensitive_sum(p, static_cast<int64_t>(i));
              if (std::memcmp(&want, &call.output[i], sizeof(float)) != 0) {
                difference = fmt::format("index {} of {}: expected {}, actual {}", i,
                                         call.output.size(), want, call.output[i]);
              }
            }
            CHECK(difference == "");
          }
        }
      }
    }
  }
}

TEST_CASE("shm allreduce fails naming a rank that never arrives", "[shm][allreduce][errors]") {
  const std::vector<Status> statuses = statuses_without_rank2([](ShmAllreduceGroup& group) {
    std::vector<float> buffer(100, 1.0f);
    return group.allreduce(buffer.data(), buffer.data(), 100, sizeof(float), float_sum());
  });
  for (const Status& status : statuses) {
    REQUIRE_FALSE(status.is_ok());
    CHECK_THAT(status.message(),
               Catch::Contains("rank 2 did not finish copying in of chunk 0 of 2 within 200 ms"));
  }
}

TEST_CASE("shm allreduce fails at once when a rank's process has exited",
          "[shm][allreduce][errors]") {
  // The pid of a process that has exited and been reaped.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  REQUIRE(waitpid(child, nullptr, 0) == child);

  HeapArea area(2, 256);
  shm_region_control(area.regions()[1])->pid.value.store(static_cast<uint64_t>(child));
  // No stall timeout: only the liveness check can end the wait.
  ShmAllreduceGroup group(0, area.regions(), 256, std::chrono::milliseconds(0));
  std::vector<float> buffer(10, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  const Status status =
      group.allreduce(buffer.data(), buffer.data(), 10, sizeof(float), float_sum());
  REQUIRE_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains(fmt::format("rank 1 (pid {}) exited", child)));
  CHECK_THAT(status.message(), Catch::Contains("rank 0 was waiting for it to finish copying in"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

// The single-copy path for every call (min bytes 0) and for none.
constexpr std::size_t kAlwaysSingleCopy = 0;
constexpr std::size_t kNeverSingleCopy = SIZE_MAX;

// "" when both runs succeeded with the same bits in every rank's every call.
template <typename T>
std::string first_difference(const std::vector<std::vector<RankCall<T>>>& a,
                             const std::vector<std::vector<RankCall<T>>>& b) {
  for (std::size_t rank = 0; rank < a.size(); ++rank) {
    for (std::size_t c = 0; c < a[rank].size(); ++c) {
      const RankCall<T>& x = a[rank][c];
      const RankCall<T>& y = b[rank][c];
      if (!x.status.is_ok() || !y.status.is_ok()) {
        return fmt::format("rank {} call {}: '{}' / '{}'", rank, c, x.status.message(),
                           y.status.message());
      }
      if (x.output.size() != y.output.size()) return "sizes differ";
      for (std::size_t i = 0; i < x.output.size(); ++i) {
        if (std::memcmp(&x.output[i], &y.output[i], sizeof(T)) != 0) {
          return fmt::format("rank {} call {} index {}: {} against {}", rank, c, i,
                             static_cast<double>(x.output[i]), static_cast<double>(y.output[i]));
        }
      }
    }
  }
  return "";
}

TEST_CASE("shm allreduce single copy: the reduction order's bits, as the slot path's",
          "[shm][allreduce][single_copy][reduction_order][sweep]") {
  const auto value = [](int rank, int, int64_t i) {
    return testing::order_sensitive_value(rank, i);
  };
  // Around a scratch block, a chunk and several chunks; shares of a line.
  const std::vector<int64_t> counts = {1,
                                       17,
                                       1001,
                                       int64_t{kShmSingleCopyBlockBytes / 4} + 3,
                                       int64_t{kShmSingleCopyChunkBytes / 4} - 1,
                                       int64_t{kShmSingleCopyChunkBytes / 4} * 2 + 17};
  for (int p = 1; p <= 5; ++p) {
    for (bool in_place : {false, true}) {
      INFO("p=" << p << " in_place=" << in_place);
      const auto single = run_shm<float>(p, kDefaultShmSlotBytes, counts, in_place, value,
                                         float_sum(), {}, std::nullopt, 0, kAlwaysSingleCopy);
      const auto slots = run_shm<float>(p, kDefaultShmSlotBytes, counts, in_place, value,
                                        float_sum(), {}, std::nullopt, 0, kNeverSingleCopy);
      CHECK(first_difference(single, slots) == "");
      CHECK(first_mismatch<float>(
                single, [p](int, int64_t i) { return testing::order_sensitive_sum(p, i); }) == "");
    }
  }
}

TEST_CASE("shm allreduce single copy: sums, extremes and finish of every element size",
          "[shm][allreduce][single_copy]") {
  for (int p : {2, 3, 4}) {
    for (bool in_place : {false, true}) {
      INFO("p=" << p << " in_place=" << in_place);
      const std::vector<int64_t> counts = {0, 1, 15, 16, 17, 100, 65539};
      const auto sums = run_shm<float>(p, kDefaultShmSlotBytes, counts, in_place, small_value,
                                       float_sum(), {}, std::nullopt, 0, kAlwaysSingleCopy);
      CHECK(first_mismatch<float>(
                sums, [&](int call, int64_t i) { return small_sum(p, call, i); }) == "");

      const auto spread = [](int rank, int call, int64_t i) {
        return static_cast<int32_t>((i * 37 + rank * 101 + call) % 211) - 105;
      };
      const auto maxima =
          run_shm<int32_t>(p, kDefaultShmSlotBytes, {1, 33, 5000, 300007}, in_place, spread,
                           testing::int32_max(), {}, std::nullopt, 0, kAlwaysSingleCopy);
      CHECK(first_mismatch<int32_t>(maxima, [&](int call, int64_t i) {
              int32_t extreme = spread(0, call, i);
              for (int r = 1; r < p; ++r) extreme = std::max(extreme, spread(r, call, i));
              return extreme;
            }) == "");
      const auto minima =
          run_shm<int32_t>(p, kDefaultShmSlotBytes, {1, 33, 5000}, in_place, spread,
                           testing::int32_min(), {}, std::nullopt, 0, kAlwaysSingleCopy);
      CHECK(first_mismatch<int32_t>(minima, [&](int call, int64_t i) {
              int32_t extreme = spread(0, call, i);
              for (int r = 1; r < p; ++r) extreme = std::min(extreme, spread(r, call, i));
              return extreme;
            }) == "");

      const auto results8 = run_shm<int8_t>(
          p, kDefaultShmSlotBytes, {1, 63, 64, 65, 999, 1000003}, in_place,
          [](int rank, int, int64_t i) { return static_cast<int8_t>((i * 13 + rank * 7) % 100); },
          elementwise<int8_t>([](int8_t a, int8_t b) { return static_cast<int8_t>(a + b); }), {},
          std::nullopt, 0, kAlwaysSingleCopy);
      CHECK(first_mismatch<int8_t>(results8, [p](int, int64_t i) {
              int sum = 0;
              for (int r = 0; r < p; ++r) sum += static_cast<int>((i * 13 + r * 7) % 100);
              return static_cast<int8_t>(sum);
            }) == "");
      const auto results16 = run_shm<int16_t>(
          p, kDefaultShmSlotBytes, {31, 32, 33, 10007}, in_place,
          [](int rank, int, int64_t i) { return static_cast<int16_t>(i % 1000 - rank); },
          elementwise<int16_t>([](int16_t a, int16_t b) { return static_cast<int16_t>(a + b); }),
          {}, std::nullopt, 0, kAlwaysSingleCopy);
      CHECK(first_mismatch<int16_t>(results16, [p](int, int64_t i) {
              return static_cast<int16_t>(p * (i % 1000) - p * (p - 1) / 2);
            }) == "");
      const auto results64 = run_shm<double>(
          p, kDefaultShmSlotBytes, {7, 8, 9, 1001, 200003}, in_place,
          [](int rank, int, int64_t i) { return static_cast<double>(i) * 0.5 + rank; },
          elementwise<double>([](double a, double b) { return a + b; }), {}, std::nullopt, 0,
          kAlwaysSingleCopy);
      CHECK(first_mismatch<double>(results64, [p](int, int64_t i) {
              return static_cast<double>(i) * 0.5 * p + p * (p - 1) / 2.0;
            }) == "");
    }
    std::atomic<int64_t> finished{0};
    const FinishFn halve_and_count = [&finished](void* data, int64_t count) {
      auto* values = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) values[i] *= 0.5f;
      finished += count;
    };
    const auto halves =
        run_shm<float>(p, kDefaultShmSlotBytes, {5, 1000, 700001}, false, small_value, float_sum(),
                       halve_and_count, std::nullopt, 0, kAlwaysSingleCopy);
    CHECK(first_mismatch<float>(
              halves, [p](int call, int64_t i) { return small_sum(p, call, i) * 0.5f; }) == "");
    CHECK(finished.load() == 5 + 1000 + 700001);
  }
}

TEST_CASE("shm allreduce single copy keeps an out-of-place input unchanged",
          "[shm][allreduce][single_copy]") {
  const int64_t count = int64_t{kShmSingleCopyChunkBytes / 4} + 1000;
  const auto results = run_shm<float>(3, kDefaultShmSlotBytes, {count}, false, small_value,
                                      float_sum(), {}, std::nullopt, 0, kAlwaysSingleCopy);
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    const RankCall<float>& call = results[rank][0];
    REQUIRE(call.status.is_ok());
    for (int64_t i = 0; i < count; ++i) {
      INFO("rank " << rank << " index " << i);
      REQUIRE(call.input[static_cast<std::size_t>(i)] == small_value(static_cast<int>(rank), 0, i));
    }
  }
}

TEST_CASE("shm allreduce single copy: calls below the threshold and above alternate",
          "[shm][allreduce][single_copy]") {
  // 4 KiB and up single copy, below through the slots, on one group.
  const std::vector<int64_t> counts = {1000, 1024, 17, 300001, 1023, 2000};
  CHECK(kShmSingleCopyMinBytes < kShmSingleCopyEndBytes);
  for (int p : {2, 4}) {
    const auto results =
        run_shm<float>(p, 4096, counts, true, small_value, float_sum(), {}, std::nullopt, 0, 4096);
    CHECK(first_mismatch<float>(results,
                                [&](int call, int64_t i) { return small_sum(p, call, i); }) == "");
  }
}

// Probes of p thread-ranks, after every rank's group is made.
std::vector<Status> probe_all(int p, CrossMemoryRead read) {
  HeapArea area(p, 256);
  std::vector<Status> statuses(static_cast<std::size_t>(p));
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    threads.emplace_back([&, rank] {
      ShmAllreduceGroup group(rank, area.regions(), 256, std::chrono::seconds(60));
      if (read != nullptr) group.set_cross_memory_read(read);
      ++made;
      while (made.load() < p) std::this_thread::yield();
      statuses[static_cast<std::size_t>(rank)] = group.probe_single_copy();
      // The regions outlive every probe.
      ++made;
      while (made.load() < 2 * p) std::this_thread::yield();
    });
  }
  for (auto& thread : threads) thread.join();
  return statuses;
}

ssize_t refuse_read(pid_t, const iovec*, unsigned long, const iovec*, unsigned long,
                    unsigned long) {
  errno = EPERM;
  return -1;
}

TEST_CASE("shm allreduce single copy: the probe reads every peer, or names what refused",
          "[shm][allreduce][single_copy][errors]") {
  for (const Status& status : probe_all(4, nullptr)) CHECK(status.message() == "");
  const std::vector<Status> refused = probe_all(3, &refuse_read);
  for (std::size_t rank = 0; rank < refused.size(); ++rank) {
    REQUIRE_FALSE(refused[rank].is_ok());
    const int first_peer = rank == 0 ? 1 : 0;
    CHECK_THAT(refused[rank].message(),
               Catch::Contains(fmt::format("rank {} cannot read the memory of rank {} (pid {}) "
                                           "with process_vm_readv: {}",
                                           rank, first_peer, getpid(), std::strerror(EPERM))));
  }
}

// Which calls take the single-copy path: with every read refused, a call
// that reads fails and one through the slots succeeds.
std::vector<Status> run_refused(int p, int64_t count, std::size_t min_bytes, std::size_t end_bytes,
                                std::size_t rank0_later_bytes) {
  HeapArea area(p, 4096);
  std::vector<Status> statuses(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    threads.emplace_back([&, rank] {
      // A failed read fails the other ranks' waits through the stall timeout.
      ShmAllreduceGroup group(rank, area.regions(), 4096, std::chrono::milliseconds(500));
      group.set_single_copy_bytes(min_bytes, end_bytes);
      group.set_cross_memory_read(&refuse_read);
      std::vector<float> buffer(static_cast<std::size_t>(count), 1.0f);
      statuses[static_cast<std::size_t>(rank)] =
          group.allreduce(buffer.data(), buffer.data(), count, sizeof(float), float_sum(), {},
                          rank == 0 ? rank0_later_bytes : 0);
    });
  }
  for (auto& thread : threads) thread.join();
  return statuses;
}

TEST_CASE("shm allreduce single copy: the sizes it takes, and rank 0 keeps streaming calls out",
          "[shm][allreduce][single_copy]") {
  const auto all_ok = [](const std::vector<Status>& statuses) {
    return std::all_of(statuses.begin(), statuses.end(),
                       [](const Status& status) { return status.is_ok(); });
  };
  // 4000 bytes: below the sizes, at the first, at the end (excluded).
  CHECK(all_ok(run_refused(2, 1000, 4004, 8000, 0)));
  CHECK_FALSE(all_ok(run_refused(2, 1000, 4000, 8000, 0)));
  CHECK(all_ok(run_refused(2, 1000, 2000, 4000, 0)));
  // Rank 0's call streams its output (kShmStreamingMinBytes with what
  // follows): every rank takes the slots, whatever its own later_bytes.
  CHECK(all_ok(run_refused(3, 1000, 0, SIZE_MAX, kShmStreamingMinBytes)));
  const std::vector<Status> read = run_refused(3, 1000, 0, SIZE_MAX, 0);
  CHECK_THAT(read[0].message(), Catch::Contains("rank 0 could not read rank 1's (pid") &&
                                    Catch::Contains(std::strerror(EPERM)));
}

// Reads that succeed until kReadsBeforeFailure have been made, then fail
// with ESRCH as for a peer that has exited.
std::atomic<int> reads_made{0};
constexpr int kReadsBeforeFailure = 5;
ssize_t fail_after_some_reads(pid_t pid, const iovec* local, unsigned long local_count,
                              const iovec* remote, unsigned long remote_count,
                              unsigned long flags) {
  if (reads_made.fetch_add(1) >= kReadsBeforeFailure) {
    errno = ESRCH;
    return -1;
  }
  return process_vm_readv(pid, local, local_count, remote, remote_count, flags);
}

TEST_CASE("shm allreduce single copy: a read failing mid-call fails every rank's call",
          "[shm][allreduce][single_copy][errors]") {
  reads_made = 0;
  HeapArea area(2, 256);
  // The hooks of make_node_shm in small: a failure one rank finds reaches
  // the other's waits as a fault.
  std::mutex mutex;
  std::optional<std::string> fault;
  std::vector<Status> statuses(2);
  std::vector<std::thread> threads;
  const int64_t count = int64_t{kShmSingleCopyChunkBytes / 4} * 3;
  // Each rank's buffer outlives both calls: rank 0 may still read rank 1's
  // after rank 1 has failed and returned, as another process's caller keeps
  // its tensor while herd reports the failure.
  std::vector<std::vector<float>> buffers(
      2, std::vector<float>(static_cast<std::size_t>(count), 1.0f));
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      // No stall timeout: only the failure can end the other rank's wait.
      ShmAllreduceGroup group(rank, area.regions(), 256, std::chrono::milliseconds(0));
      group.set_single_copy_bytes(0, SIZE_MAX);
      if (rank == 1) group.set_cross_memory_read(&fail_after_some_reads);
      ShmWaitHooks hooks;
      hooks.fault = [&]() -> std::optional<std::string> {
        std::lock_guard<std::mutex> lock(mutex);
        return fault;
      };
      hooks.failed = [&](const std::string& message) {
        std::lock_guard<std::mutex> lock(mutex);
        fault = message;
      };
      group.set_wait_hooks(std::move(hooks));
      std::vector<float>& buffer = buffers[static_cast<std::size_t>(rank)];
      statuses[static_cast<std::size_t>(rank)] =
          group.allreduce(buffer.data(), buffer.data(), count, sizeof(float), float_sum());
    });
  }
  for (auto& thread : threads) thread.join();
  // Rank 1's sixth read: of its share of rank 0's input, in the first chunk
  // (a chunk's share of a rank is 16 blocks).
  const std::string expected =
      fmt::format("rank 1 could not read rank 0's (pid {}) input in chunk 0 of 3 of a {}-byte call",
                  getpid(), count * 4);
  REQUIRE_FALSE(statuses[1].is_ok());
  CHECK_THAT(statuses[1].message(), Catch::Contains(expected));
  CHECK_THAT(statuses[1].message(), Catch::Contains("(the process has exited)"));
  REQUIRE_FALSE(statuses[0].is_ok());
  CHECK_THAT(statuses[0].message(), Catch::Contains("stopped: "));
  CHECK_THAT(statuses[0].message(), Catch::Contains(expected));
}

}  // namespace
}  // namespace herd::collectives
