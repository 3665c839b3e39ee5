// Ring reducescatter over the in-process fabric: every rank count 1..9 and
// 15, block counts that are uneven, empty, fewer in total than the ranks, or
// all on one rank, segments of one element up to the default (the smallest
// over the largest count at 2 to 4 ranks only), in place and out of place; float32 sums and int32
// maxima against closed forms; float sums of non-integers bit-identical to the reduction order
// whatever the segment size; the messages sent; and the errors of counts that disagree or a missing
// rank.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/chunking.h"
#include "collectives/reducescatter.h"
#include "collectives_test_util.h"
#include "rank_checks.h"
#include "reduction_order_reference.h"

namespace herd::collectives {
namespace {

using testing::prefix_sum;

const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15};
// One element, five, and the default.
const std::vector<std::size_t> kSegmentBytes = {4, 20, kDefaultSegmentBytes};

// A named rule for the number of elements of block r on p ranks.
struct BlockPattern {
  std::string name;
  std::function<int64_t(int p, int r)> count;
};

std::vector<BlockPattern> patterns() {
  std::vector<BlockPattern> result = {
      {"r*3 % 5", [](int, int r) { return int64_t{r * 3 % 5}; }},
      {"all on rank 0", [](int, int r) { return r == 0 ? int64_t{100} : int64_t{0}; }},
      {"fewer than the ranks", [](int p, int r) { return chunk_range(p - 1, p, r).count; }},
  };
  for (int64_t total : {0, 1, 7, 1000, 65539}) {
    result.push_back({std::to_string(total) + " in chunks",
                      [total](int p, int r) { return chunk_range(total, p, r).count; }});
  }
  return result;
}

std::vector<int64_t> counts_of(const BlockPattern& pattern, int p) {
  std::vector<int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(pattern.count(p, r));
  return counts;
}

// Runs ring_reducescatter on p ranks, rank r's whole input being input(r, i)
// at global index i; each rank's result is its block. With in_place the
// output is the rank's block inside the input.
template <typename T>
std::vector<testing::RankResult<T>> run_reducescatter(
    int p, const std::vector<int64_t>& counts, const std::function<T(int rank, int64_t i)>& input,
    const ops::ReduceFn& reduce, std::size_t segment_bytes, bool in_place = false) {
  const int64_t total = prefix_sum(counts, p);
  return testing::run_ranks<T>(p, [&](int rank, Transport& transport, std::vector<T>& out) {
    std::vector<T> buf(static_cast<std::size_t>(total));
    for (int64_t i = 0; i < total; ++i) buf[static_cast<std::size_t>(i)] = input(rank, i);
    const int64_t offset = prefix_sum(counts, rank);
    const int64_t own = counts[static_cast<std::size_t>(rank)];
    out.assign(static_cast<std::size_t>(own), T{});
    void* output = in_place ? static_cast<void*>(buf.data() + offset) : out.data();
    const Status status =
        ring_reducescatter(buf.data(), output, counts, sizeof(T), reduce, transport, segment_bytes);
    if (in_place) {
      std::copy(buf.begin() + offset, buf.begin() + offset + own, out.begin());
    }
    return status;
  });
}

// (r + 1) + (i % 7): small integers, so the float sum is exact in any order
// and equals p(p + 1)/2 + p (i % 7).
std::string check_float_sum(int p, const std::vector<int64_t>& counts, std::size_t segment_bytes,
                            bool in_place) {
  const auto results = run_reducescatter<float>(
      p, counts, [](int rank, int64_t i) { return static_cast<float>(rank + 1 + i % 7); },
      testing::float_sum(), segment_bytes, in_place);
  return testing::first_mismatch_by_rank<float>(
      results, [&](int rank) { return counts[static_cast<std::size_t>(rank)]; },
      [&](int rank, int64_t j) {
        const int64_t i = prefix_sum(counts, rank) + j;
        return static_cast<float>(p * (p + 1) / 2 + p * (i % 7));
      });
}

int32_t spread_value(int rank, int64_t i) {
  return static_cast<int32_t>((i * 37 + rank * 101) % 211) - 105;
}

std::string check_int32_max(int p, const std::vector<int64_t>& counts, std::size_t segment_bytes) {
  const auto results =
      run_reducescatter<int32_t>(p, counts, spread_value, testing::int32_max(), segment_bytes);
  return testing::first_mismatch_by_rank<int32_t>(
      results, [&](int rank) { return counts[static_cast<std::size_t>(rank)]; },
      [&](int rank, int64_t j) {
        const int64_t i = prefix_sum(counts, rank) + j;
        int32_t max = spread_value(0, i);
        for (int r = 1; r < p; ++r) max = std::max(max, spread_value(r, i));
        return max;
      });
}

TEST_CASE("ring reducescatter sums float32 into uneven and empty blocks",
          "[reducescatter][sweep]") {
  for (int p : kRankCounts) {
    for (const BlockPattern& pattern : patterns()) {
      for (std::size_t segment_bytes : kSegmentBytes) {
        if (!testing::ring_sweep_case(p, prefix_sum(counts_of(pattern, p), p), segment_bytes,
                                      kDefaultSegmentBytes)) {
          continue;
        }
        CAPTURE(p, pattern.name, segment_bytes);
        CHECK(check_float_sum(p, counts_of(pattern, p), segment_bytes, false) == "");
      }
    }
  }
}

TEST_CASE("ring reducescatter takes int32 max into uneven and empty blocks",
          "[reducescatter][sweep]") {
  for (int p : kRankCounts) {
    for (const BlockPattern& pattern : patterns()) {
      for (std::size_t segment_bytes : kSegmentBytes) {
        if (!testing::ring_sweep_case(p, prefix_sum(counts_of(pattern, p), p), segment_bytes,
                                      kDefaultSegmentBytes)) {
          continue;
        }
        CAPTURE(p, pattern.name, segment_bytes);
        CHECK(check_int32_max(p, counts_of(pattern, p), segment_bytes) == "");
      }
    }
  }
}

TEST_CASE("ring reducescatter in place: output is the rank's block of the input",
          "[reducescatter]") {
  for (int p : kRankCounts) {
    for (const BlockPattern& pattern : patterns()) {
      CAPTURE(p, pattern.name);
      CHECK(check_float_sum(p, counts_of(pattern, p), 20, true) == "");
    }
  }
}

TEST_CASE("ring reducescatter float sums are bit-identical to the reduction order",
          "[reducescatter][sweep]") {
  // Non-integers, whose float sums depend on the order of the additions.
  auto input = [](int rank, int64_t i) {
    return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * 100.0 / 3.0);
  };
  // Every element ends as the reduction order's sum (reducescatter.h),
  // computed here in float by the tests' own reference.
  auto reference_sum = [&input](int p, int64_t i) {
    return testing::reduction_order_reference<float>(
        p, [&input, i](int rank) { return input(rank, i); }, testing::add_floats);
  };
  for (int p : kRankCounts) {
    for (const BlockPattern& pattern : patterns()) {
      const std::vector<int64_t> counts = counts_of(pattern, p);
      for (std::size_t segment_bytes : kSegmentBytes) {
        if (!testing::ring_sweep_case(p, prefix_sum(counts_of(pattern, p), p), segment_bytes,
                                      kDefaultSegmentBytes)) {
          continue;
        }
        CAPTURE(p, pattern.name, segment_bytes);
        const auto results =
            run_reducescatter<float>(p, counts, input, testing::float_sum(), segment_bytes);
        int64_t far_off = 0;  // from the exact sum
        std::string first_difference;
        for (int rank = 0; rank < p && first_difference.empty(); ++rank) {
          const auto& result = results[static_cast<std::size_t>(rank)];
          REQUIRE(result.status.message() == "");
          for (std::size_t j = 0; j < result.data.size(); ++j) {
            const int64_t i = prefix_sum(counts, rank) + static_cast<int64_t>(j);
            const float expected = reference_sum(p, i);
            if (std::memcmp(&expected, &result.data[j], sizeof(float)) != 0) {
              std::ostringstream out;
              out.precision(9);
              out << "rank " << rank << " index " << j << ": expected " << expected << ", actual "
                  << result.data[j];
              first_difference = out.str();
              break;
            }
            double exact = 0;
            for (int r = 0; r < p; ++r) exact += input(r, i);
            if (std::abs(result.data[j] - exact) > 1e-3) ++far_off;
          }
        }
        CHECK(first_difference == "");
        CHECK(far_off == 0);
      }
    }
  }
}

TEST_CASE("ring reducescatter sends every non-empty block but the rank's own, once a segment",
          "[reducescatter]") {
  // Rank r sends blocks r+1, r+2, ..., r-1 (mod p): all but block r.
  for (int p : {1, 2, 3, 5, 8}) {
    std::vector<int64_t> counts;
    for (int r = 0; r < p; ++r) counts.push_back(r * 3 % 5);
    std::vector<int64_t> sends(static_cast<std::size_t>(p));
    run_inproc_ranks(p, [&](int rank, Transport& transport) {
      testing::CountingTransport counting(transport);
      std::vector<float> buf(static_cast<std::size_t>(prefix_sum(counts, p)));
      std::vector<float> out(static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]));
      if (ring_reducescatter(buf.data(), out.data(), counts, sizeof(float), testing::float_sum(),
                             counting, 8)
              .is_ok()) {
        sends[static_cast<std::size_t>(rank)] = counting.sends();
      }
    });
    for (int rank = 0; rank < p; ++rank) {
      int64_t expected = 0;
      for (int block = 0; block < p; ++block) {
        const int64_t count = counts[static_cast<std::size_t>(block)];
        if (block != rank) expected += (count + 1) / 2;  // 2-float segments
      }
      CAPTURE(p, rank);
      CHECK(sends[static_cast<std::size_t>(rank)] == expected);
    }
  }
}

TEST_CASE("ring reducescatter with counts that differ between ranks fails with both lengths",
          "[reducescatter][errors]") {
  // Rank 1 believes block 1 holds 3 floats, rank 0 that it holds 2. In step
  // 0 rank r sends block (r - 1) mod 2 and receives block r.
  const auto messages = testing::run_for_messages(2, -1, [](int rank, Transport& transport) {
    const std::vector<int64_t> counts = {2, rank == 0 ? 2 : 3};
    std::vector<float> buf(static_cast<std::size_t>(counts[0] + counts[1]), 1.0f);
    std::vector<float> out(static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]));
    return ring_reducescatter(buf.data(), out.data(), counts, sizeof(float), testing::float_sum(),
                              transport, kDefaultSegmentBytes);
  });
  // Rank 1 receives block 1 from rank 0: expects 12 bytes, gets 8.
  CHECK_THAT(messages[1], Catch::StartsWith("ring reducescatter reduce-scatter step 0 (rank 1, "
                                            "recv from 0): ") &&
                              Catch::Contains("expected 12 bytes, got a message of 8 bytes"));
  CHECK(messages[0] == "");
}

TEST_CASE("ring reducescatter with a missing rank fails naming the step, rank and peer",
          "[reducescatter][errors]") {
  const auto messages = testing::run_for_messages(3, 2, [](int rank, Transport& transport) {
    const std::vector<int64_t> counts = {2, 2, 2};
    std::vector<float> buf(6, 1.0f);
    std::vector<float> out(2);
    return ring_reducescatter(buf.data(), out.data(), counts, sizeof(float), testing::float_sum(),
                              transport, kDefaultSegmentBytes);
  });
  CHECK_THAT(messages[0], Catch::StartsWith("ring reducescatter reduce-scatter step 0 (rank 0, "
                                            "recv from 2): "));
  CHECK_THAT(messages[1], Catch::StartsWith("ring reducescatter reduce-scatter step 0 (rank 1, "
                                            "recv from 2): "));
}

}  // namespace
}  // namespace herd::collectives
