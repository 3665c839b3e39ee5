// The reduction order (collectives/reduction_order.h): its fold against the
// level-by-level reference of reduction_order_reference.h for rank counts
// 1..17, across fold blocks and with the output on one of the sources; then
// every allreduce algorithm of the transport (ring with segments of one
// element up to the default, recursive doubling, allreduce() for both of
// its choices), in place and out of place, and ring reducescatter with
// uneven blocks, each against the reference at every index, on float sums
// that round differently in any other order.
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/allreduce.h"
#include "collectives/chunking.h"
#include "collectives/reducescatter.h"
#include "collectives/reduction_order.h"
#include "collectives_test_util.h"
#include "rank_checks.h"
#include "reduction_order_reference.h"

namespace herd::collectives {
namespace {

using testing::order_sensitive_sum;
using testing::order_sensitive_value;

// "" when got[j] has the bits of expected(first + j) for every j; else the
// first index that differs, both values, and the count of differences.
std::string first_bit_difference(const std::vector<float>& got, int64_t first,
                                 const std::function<float(int64_t i)>& expected) {
  int64_t differences = 0;
  std::ostringstream out;
  out.precision(9);
  for (std::size_t j = 0; j < got.size(); ++j) {
    const float want = expected(first + static_cast<int64_t>(j));
    if (std::memcmp(&want, &got[j], sizeof(float)) == 0) continue;
    if (differences++ == 0) {
      out << "index " << first + static_cast<int64_t>(j) << ": expected " << want << ", actual "
          << got[j];
    }
  }
  if (differences > 0) out << " (" << differences << " of " << got.size() << " differ)";
  return out.str();
}

TEST_CASE("the float sums of the tests tell the reduction order from chains in rank order",
          "[reduction_order]") {
  for (int p = 3; p <= 9; ++p) {
    for (int first = 0; first < p; ++first) {
      // On 3 ranks the tree is (x_0 + x_1) + x_2, the chain from rank 0.
      if (p == 3 && first == 0) continue;
      int64_t differing = 0;
      for (int64_t i = 0; i < 1000; ++i) {
        const float tree = order_sensitive_sum(p, i);
        const float chain = testing::rotated_left_fold_sum(p, first, i);
        if (std::memcmp(&tree, &chain, sizeof(float)) != 0) ++differing;
      }
      CAPTURE(p, first);
      CHECK(differing > 0);
    }
  }
}

TEST_CASE("fold_in_reduction_order computes the reference order for 1 to 17 ranks",
          "[reduction_order][sweep]") {
  // 20000 floats: more than one fold block (kFoldBlockBytes).
  for (int p = 1; p <= 17; ++p) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{20000}}) {
      std::vector<std::vector<float>> inputs(static_cast<std::size_t>(p));
      std::vector<const void*> sources;
      for (int rank = 0; rank < p; ++rank) {
        auto& input = inputs[static_cast<std::size_t>(rank)];
        for (int64_t i = 0; i < count; ++i) input.push_back(order_sensitive_value(rank, i));
        sources.push_back(input.data());
      }
      std::vector<float> out(static_cast<std::size_t>(count));
      detail::fold_in_reduction_order(out.data(), sources.data(), p, count, sizeof(float),
                                      testing::float_sum());
      CAPTURE(p, count);
      CHECK(first_bit_difference(out, 0, [p](int64_t i) { return order_sensitive_sum(p, i); }) ==
            "");
      // The output may be any one source: the reduction of the same values.
      for (int on = 0; on < p; ++on) {
        std::vector<std::vector<float>> copies = inputs;
        std::vector<const void*> copy_sources;
        for (const auto& copy : copies) copy_sources.push_back(copy.data());
        auto& target = copies[static_cast<std::size_t>(on)];
        detail::fold_in_reduction_order(target.data(), copy_sources.data(), p, count, sizeof(float),
                                        testing::float_sum());
        CAPTURE(on);
        CHECK(first_bit_difference(target, 0,
                                   [p](int64_t i) { return order_sensitive_sum(p, i); }) == "");
      }
    }
  }
}

// Runs `algorithm` (in place when in_place, else from a separate input) on p
// thread-ranks over order_sensitive_value; every rank's output.
using OutOfPlaceFn =
    std::function<Status(const void* input, void* output, int64_t count, Transport& transport)>;
std::vector<testing::RankResult<float>> run_allreduce_on(int p, int64_t count, bool in_place,
                                                         const OutOfPlaceFn& algorithm) {
  return testing::run_ranks<float>(p, [&](int rank, Transport& transport, std::vector<float>& out) {
    std::vector<float> input;
    for (int64_t i = 0; i < count; ++i) input.push_back(order_sensitive_value(rank, i));
    out = in_place ? input : std::vector<float>(static_cast<std::size_t>(count));
    return algorithm(in_place ? out.data() : input.data(), out.data(), count, transport);
  });
}

// "" when every rank succeeded with the reference's bits at every index.
std::string check_reference(int p, const std::vector<testing::RankResult<float>>& results) {
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    if (!results[rank].status.is_ok()) {
      return "rank " + std::to_string(rank) + " failed: " + results[rank].status.message();
    }
    const std::string difference = first_bit_difference(
        results[rank].data, 0, [p](int64_t i) { return order_sensitive_sum(p, i); });
    if (!difference.empty()) return "rank " + std::to_string(rank) + " " + difference;
  }
  return "";
}

const std::vector<int64_t> kCounts = {1, 2, 7, 100, 1001, 20011};

TEST_CASE("ring allreduce reduces every element in the reduction order",
          "[reduction_order][sweep]") {
  // One element per segment, three, 1 KiB, the default.
  for (int p = 2; p <= 9; ++p) {
    for (std::size_t segment_bytes :
         {std::size_t{4}, std::size_t{12}, std::size_t{1024}, kDefaultSegmentBytes}) {
      for (int64_t count : kCounts) {
        // One-element segments of 20011 floats take long: fewer of them.
        if (segment_bytes < 64 && count > 1001) continue;
        for (bool in_place : {false, true}) {
          CAPTURE(p, segment_bytes, count, in_place);
          const auto results = run_allreduce_on(
              p, count, in_place,
              [segment_bytes](const void* input, void* output, int64_t n, Transport& transport) {
                return ring_allreduce(input, output, n, sizeof(float), testing::float_sum(),
                                      transport, segment_bytes);
              });
          CHECK(check_reference(p, results) == "");
        }
      }
    }
  }
}

TEST_CASE("recursive doubling reduces every element in the reduction order", "[reduction_order]") {
  for (int p = 2; p <= 9; ++p) {
    for (int64_t count : kCounts) {
      for (bool in_place : {false, true}) {
        CAPTURE(p, count, in_place);
        const auto results =
            run_allreduce_on(p, count, in_place,
                             [](const void* input, void* output, int64_t n, Transport& transport) {
                               return recursive_doubling_allreduce(input, output, n, sizeof(float),
                                                                   testing::float_sum(), transport);
                             });
        CHECK(check_reference(p, results) == "");
      }
    }
  }
}

TEST_CASE("allreduce gives the same bits whichever algorithm its threshold picks",
          "[reduction_order]") {
  for (int p : {3, 4, 5, 7}) {
    for (int64_t threshold : {int64_t{0}, kSmallThresholdByRanks, int64_t{1} << 30}) {
      AllreduceOptions options;
      options.small_message_threshold_bytes = threshold;
      options.segment_bytes = 256;
      CAPTURE(p, threshold);
      const auto results = run_allreduce_on(
          p, 5003, false, [&options](const void* input, void* output, int64_t n, Transport& t) {
            return allreduce(input, output, n, sizeof(float), testing::float_sum(), t, options);
          });
      CHECK(check_reference(p, results) == "");
    }
  }
}

TEST_CASE("ring reducescatter reduces every element of uneven blocks in the reduction order",
          "[reduction_order]") {
  for (int p = 2; p <= 9; ++p) {
    // Uneven blocks, one of them empty.
    std::vector<int64_t> counts;
    for (int r = 0; r < p; ++r) counts.push_back(r == 1 ? 0 : 50 + 31 * r);
    for (std::size_t segment_bytes : {std::size_t{12}, kDefaultSegmentBytes}) {
      for (bool in_place : {false, true}) {
        const int64_t total = testing::prefix_sum(counts, p);
        const auto results = testing::run_ranks<float>(p, [&](int rank, Transport& transport,
                                                              std::vector<float>& out) {
          std::vector<float> buf;
          for (int64_t i = 0; i < total; ++i) buf.push_back(order_sensitive_value(rank, i));
          const int64_t offset = testing::prefix_sum(counts, rank);
          const int64_t own = counts[static_cast<std::size_t>(rank)];
          out.assign(static_cast<std::size_t>(own), 0.0f);
          void* output = in_place ? static_cast<void*>(buf.data() + offset) : out.data();
          const Status status = ring_reducescatter(buf.data(), output, counts, sizeof(float),
                                                   testing::float_sum(), transport, segment_bytes);
          if (in_place) out.assign(buf.begin() + offset, buf.begin() + offset + own);
          return status;
        });
        for (int rank = 0; rank < p; ++rank) {
          const auto& result = results[static_cast<std::size_t>(rank)];
          CAPTURE(p, segment_bytes, in_place, rank);
          REQUIRE(result.status.message() == "");
          CHECK(first_bit_difference(result.data, testing::prefix_sum(counts, rank),
                                     [p](int64_t i) { return order_sensitive_sum(p, i); }) == "");
        }
      }
    }
  }
}

}  // namespace
}  // namespace herd::collectives
