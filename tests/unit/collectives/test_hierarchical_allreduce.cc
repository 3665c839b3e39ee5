// The hierarchical allreduce (collectives/hierarchical_allreduce.h) with
// threads as ranks: H hosts of L ranks, each host a shared-memory group over
// one heap area, each local rank's H peers an in-process fabric. Exact
// integer-valued sums, averages (finish) and maxima of float32, float64 and
// int32 for (H, L) = (2, 2), (2, 4), (3, 2), (4, 1), (2, 3), counts from 0
// past many chunks and segments, in and out of place, several calls in a row
// on one group; the bits of order-sensitive float sums against the reduction
// order of all p ranks where L is a power of two, and against the order of L
// then H ranks (which differs) where it is not; the claim behind
// hierarchical_keeps_reduction_order on the orders' expression trees; the
// shards; and a rank that never arrives.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "collectives/hierarchical_allreduce.h"
#include "collectives/inproc/inproc_transport.h"
#include "collectives_test_util.h"
#include "hierarchical_test_util.h"
#include "reduction_order_reference.h"
#include "shm_heap_area.h"

namespace herd::collectives {
namespace {

using testing::elementwise;
using testing::HeapArea;
using testing::Layout;
using testing::run_hierarchical;
using testing::run_hierarchical_checked;

const Layout kLayouts[] = {{2, 2}, {2, 4}, {3, 2}, {4, 1}, {2, 3}};
using testing::order_sensitive_value;
using testing::reduction_order_reference;

// One rank's calls, in a row on the same groups: call c reduces counts[c]
// elements of input(rank, c, i); returns "" when every rank's every call
// succeeded, left an out-of-place input alone and holds expected(c, i).
template <typename T>
std::string check_calls(Layout layout, std::size_t slot_bytes, const std::vector<int64_t>& counts,
                        bool in_place, const std::function<T(int rank, int call, int64_t i)>& input,
                        const std::function<T(int call, int64_t i)>& expected,
                        const ops::ReduceFn& reduce, const FinishFn& finish = {},
                        const AllreduceOptions& options = {}) {
  return run_hierarchical_checked(
      layout, slot_bytes, [&](int rank, const HierarchicalGroup& group, std::string& failure) {
        for (std::size_t c = 0; c < counts.size(); ++c) {
          const int call = static_cast<int>(c);
          std::vector<T> in(static_cast<std::size_t>(counts[c]));
          for (int64_t i = 0; i < counts[c]; ++i)
            in[static_cast<std::size_t>(i)] = input(rank, call, i);
          std::vector<T> out = in_place ? in : std::vector<T>(in.size(), T{});
          const Status status =
              hierarchical_allreduce(in_place ? out.data() : in.data(), out.data(), counts[c],
                                     sizeof(T), reduce, group, options, finish);
          if (!status.is_ok()) return status;
          // A wrong value is recorded and the calls go on, so that every
          // rank runs them all and none waits for a peer that stopped.
          for (int64_t i = 0; i < counts[c] && failure.empty(); ++i) {
            const T want = expected(call, i);
            const T got = out[static_cast<std::size_t>(i)];
            if (got != want) {
              failure =
                  fmt::format("rank {} call {} ({} elements) index {}: expected {}, actual {}",
                              rank, c, counts[c], i, +want, +got);
            } else if (!in_place && in[static_cast<std::size_t>(i)] != input(rank, call, i)) {
              failure = fmt::format("rank {} call {} changed its input at index {}", rank, c, i);
            }
          }
        }
        return Status::ok();
      });
}

// Counts of each layout's calls: none, one element, fewer than local ranks
// (empty shards), shards of a few elements, and many chunks of 256-byte
// slots and many 512-byte segments across hosts.
std::vector<int64_t> counts_for(Layout layout) {
  const int64_t l = layout.local_size;
  return {0, 1, l - 1, 2 * l + 1, 1000, 0, 20011};
}

// Rank r's value: (r + 1) + (i + c) % 7, summing over p ranks to
// p(p+1)/2 + p((i + c) % 7), exact in every type here.
template <typename T>
T small_value(int rank, int call, int64_t i) {
  return static_cast<T>(rank + 1 + (i + call) % 7);
}
template <typename T>
T small_sum(int p, int call, int64_t i) {
  return static_cast<T>(p * (p + 1) / 2 + p * ((i + call) % 7));
}
// Rank (i + c) % p holds the largest value, 1000 + i % 100; the others less.
template <typename T>
T max_value(int p, int rank, int call, int64_t i) {
  return rank == (i + call) % p ? static_cast<T>(1000 + i % 100)
                                : static_cast<T>(rank - (i % 5) * 100);
}

template <typename T>
ops::ReduceFn sum_of() {
  return elementwise<T>([](T a, T b) { return a + b; });
}
template <typename T>
ops::ReduceFn max_of() {
  return elementwise<T>([](T a, T b) { return a < b ? b : a; });
}

template <typename T>
void check_sums_and_maxima(Layout layout, bool in_place) {
  const int p = layout.ranks();
  const std::vector<int64_t> counts = counts_for(layout);
  AllreduceOptions options;
  options.segment_bytes = 512;
  CHECK(check_calls<T>(
            layout, 256, counts, in_place, small_value<T>,
            [p](int call, int64_t i) { return small_sum<T>(p, call, i); }, sum_of<T>(), {},
            options) == "");
  CHECK(check_calls<T>(
            layout, 256, counts, in_place,
            [p](int rank, int call, int64_t i) { return max_value<T>(p, rank, call, i); },
            [](int, int64_t i) { return static_cast<T>(1000 + i % 100); }, max_of<T>(), {},
            options) == "");
  if constexpr (std::is_floating_point_v<T>) {
    // The average: the sum divided by p once, by the rank that finishes
    // each element across hosts. p(p+1)/2 / p = (p+1)/2 is a multiple of
    // 1/2, exact.
    const FinishFn divide = [p](void* data, int64_t count) {
      auto* values = static_cast<T*>(data);
      for (int64_t i = 0; i < count; ++i) values[i] /= static_cast<T>(p);
    };
    CHECK(check_calls<T>(
              layout, 256, counts, in_place, small_value<T>,
              [p](int call, int64_t i) {
                return static_cast<T>((p + 1) / 2.0 + static_cast<double>((i + call) % 7));
              },
              sum_of<T>(), divide, options) == "");
  }
}

TEST_CASE("hierarchical allreduce: exact sums, averages and maxima of float32, float64, int32",
          "[hierarchical][allreduce]") {
  for (const Layout layout : kLayouts) {
    for (const bool in_place : {true, false}) {
      INFO(layout.hosts << " hosts of " << layout.local_size << " ranks, "
                        << (in_place ? "in place" : "out of place"));
      check_sums_and_maxima<float>(layout, in_place);
      check_sums_and_maxima<double>(layout, in_place);
      check_sums_and_maxima<int32_t>(layout, in_place);
    }
  }
}

TEST_CASE("hierarchical allreduce: ring and recursive doubling across hosts, default options",
          "[hierarchical][allreduce]") {
  // Recursive doubling for every size (a threshold above them all), the
  // ring for every size (threshold 0), and the defaults, on the default
  // segment size and slot.
  AllreduceOptions doubling;
  doubling.small_message_threshold_bytes = int64_t{1} << 40;
  AllreduceOptions ring;
  ring.small_message_threshold_bytes = 0;
  for (const Layout layout : kLayouts) {
    const int p = layout.ranks();
    for (const AllreduceOptions& options : {doubling, ring, AllreduceOptions{}}) {
      INFO(layout.hosts << " hosts of " << layout.local_size << " ranks, threshold "
                        << options.small_message_threshold_bytes);
      CHECK(check_calls<float>(
                layout, kDefaultShmSlotBytes, {3, 70001, 0, 300000}, false, small_value<float>,
                [p](int call, int64_t i) { return small_sum<float>(p, call, i); }, sum_of<float>(),
                {}, options) == "");
    }
  }
}

// Every rank's result of one call on order-sensitive float sums (and the
// first failure, if any).
std::vector<std::vector<float>> order_sensitive_results(Layout layout, int64_t count,
                                                        std::string* failure) {
  std::vector<std::vector<float>> results(static_cast<std::size_t>(layout.ranks()));
  const std::vector<Status> statuses =
      run_hierarchical(layout, 512, std::chrono::seconds(60), std::chrono::seconds(60),
                       [&](int rank, const HierarchicalGroup& group) {
                         std::vector<float>& out = results[static_cast<std::size_t>(rank)];
                         for (int64_t i = 0; i < count; ++i)
                           out.push_back(order_sensitive_value(rank, i));
                         AllreduceOptions options;
                         options.segment_bytes = 256;
                         return hierarchical_allreduce(out.data(), out.data(), count, sizeof(float),
                                                       sum_of<float>(), group, options);
                       });
  for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
    if (!statuses[rank].is_ok() && failure->empty()) {
      *failure = fmt::format("rank {} failed: {}", rank, statuses[rank].message());
    }
  }
  return results;
}

// The order of all p ranks at index i (reduction_order.h).
float flat_order_sum(int p, int64_t i) {
  return reduction_order_reference<float>(
      p, [i](int rank) { return order_sensitive_value(rank, i); }, testing::add_floats);
}
// The order of each host's L ranks, then of the H host sums.
float host_then_cross_sum(Layout layout, int64_t i) {
  return reduction_order_reference<float>(
      layout.hosts,
      [&](int host) {
        return reduction_order_reference<float>(
            layout.local_size,
            [&](int l) { return order_sensitive_value(host * layout.local_size + l, i); },
            testing::add_floats);
      },
      testing::add_floats);
}

// Indices whose result lacks the bits of expected(i) on some rank.
int64_t bit_differences(const std::vector<std::vector<float>>& results,
                        const std::function<float(int64_t i)>& expected, std::string* first) {
  int64_t differences = 0;
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    for (std::size_t i = 0; i < results[rank].size(); ++i) {
      const float want = expected(static_cast<int64_t>(i));
      if (std::memcmp(&want, &results[rank][i], sizeof(float)) == 0) continue;
      if (differences++ == 0) {
        *first = fmt::format("rank {} index {}: expected {:.9g}, actual {:.9g}", rank, i, want,
                             results[rank][i]);
      }
    }
  }
  return differences;
}

TEST_CASE("hierarchical allreduce gives the flat reduction order's bits when L is a power of two",
          "[hierarchical][allreduce][reduction_order]") {
  for (const Layout layout :
       {Layout{2, 2}, Layout{2, 4}, Layout{3, 2}, Layout{4, 1}, Layout{3, 4}, Layout{5, 2}}) {
    INFO(layout.hosts << " hosts of " << layout.local_size << " ranks");
    REQUIRE(hierarchical_keeps_reduction_order(layout.local_size));
    std::string failure;
    const auto results = order_sensitive_results(layout, 4099, &failure);
    REQUIRE(failure == "");
    std::string first;
    CHECK(bit_differences(
              results, [&](int64_t i) { return flat_order_sum(layout.ranks(), i); }, &first) == 0);
    CHECK(first == "");
  }
}

TEST_CASE(
    "hierarchical allreduce with 3 ranks per host: the order of L then H ranks, not the flat "
    "one",
    "[hierarchical][allreduce][reduction_order]") {
  for (const Layout layout : {Layout{2, 3}, Layout{3, 3}}) {
    INFO(layout.hosts << " hosts of " << layout.local_size << " ranks");
    CHECK_FALSE(hierarchical_keeps_reduction_order(layout.local_size));
    std::string failure;
    const auto results = order_sensitive_results(layout, 4099, &failure);
    REQUIRE(failure == "");
    std::string first;
    CHECK(bit_differences(
              results, [&](int64_t i) { return host_then_cross_sum(layout, i); }, &first) == 0);
    CHECK(first == "");
    // The flat order gives other bits at some indices.
    CHECK(bit_differences(
              results, [&](int64_t i) { return flat_order_sum(layout.ranks(), i); }, &first) > 0);
  }
}

TEST_CASE(
    "hierarchical_keeps_reduction_order: L then H ranks is the flat order of L H ranks "
    "exactly when L is a power of two",
    "[hierarchical][reduction_order]") {
  // The orders as expression trees over the rank numbers: equal trees give
  // equal bits for every input; different trees differ for some input (the
  // bit test above shows one for L = 3).
  const auto combine = [](std::string a, std::string b) { return "(" + a + " " + b + ")"; };
  for (int local_size = 1; local_size <= 12; ++local_size) {
    for (int hosts = 2; hosts <= 9; ++hosts) {
      const std::string flat = reduction_order_reference<std::string>(
          local_size * hosts, [](int rank) { return std::to_string(rank); }, combine);
      const std::string nested = reduction_order_reference<std::string>(
          hosts,
          [&](int host) {
            return reduction_order_reference<std::string>(
                local_size, [&](int l) { return std::to_string(host * local_size + l); }, combine);
          },
          combine);
      INFO(hosts << " hosts of " << local_size << ": flat " << flat << ", hierarchical " << nested);
      CHECK((flat == nested) == hierarchical_keeps_reduction_order(local_size));
    }
  }
}

TEST_CASE("hierarchical_shard cuts a buffer into L contiguous shards, the first count % L longer",
          "[hierarchical]") {
  for (int local_size = 1; local_size <= 5; ++local_size) {
    for (int64_t count : {0, 1, 2, 4, 5, 7, 1000, 1003}) {
      int64_t next = 0;
      for (int l = 0; l < local_size; ++l) {
        int64_t begin = -1;
        int64_t end = -1;
        hierarchical_shard(count, l, local_size, &begin, &end);
        const int64_t want = count / local_size + (l < count % local_size ? 1 : 0);
        INFO("count " << count << ", local rank " << l << " of " << local_size);
        CHECK(begin == next);
        CHECK(end - begin == want);
        next = end;
      }
      CHECK(next == count);
    }
  }
}

TEST_CASE("hierarchical allreduce fails naming a rank that never arrives",
          "[hierarchical][allreduce][errors]") {
  // Local rank 1 of host 1 (rank 3) never calls: its host's local rank 0
  // fails in step 1 on the stall timeout naming it; host 0's ranks pass step
  // 1 and fail in step 2, where host 1 does not answer.
  const Layout layout{2, 2};
  const std::vector<Status> statuses = run_hierarchical(
      layout, 256, std::chrono::milliseconds(200), std::chrono::milliseconds(1000),
      [](int rank, const HierarchicalGroup& group) {
        if (rank == 3) return Status::ok();
        std::vector<float> buffer(100, 1.0f);
        return hierarchical_allreduce(buffer.data(), buffer.data(), 100, sizeof(float),
                                      sum_of<float>(), group, AllreduceOptions{});
      });
  REQUIRE_FALSE(statuses[2].is_ok());
  CHECK_THAT(
      statuses[2].message(),
      Catch::Contains("step 1, the shared-memory reduce-scatter") &&
          Catch::Contains("local rank 0 of 2 on host 1 of 2") &&
          Catch::Contains(
              "rank 1 did not finish the reduce-scatter's copy-in of chunk 0 of 2 within 200 ms"));
  for (const int rank : {0, 1}) {
    INFO("rank " << rank);
    REQUIRE_FALSE(statuses[static_cast<std::size_t>(rank)].is_ok());
    CHECK_THAT(statuses[static_cast<std::size_t>(rank)].message(),
               Catch::Contains("step 2, the allreduce across hosts") &&
                   Catch::Contains(fmt::format("local rank {} of 2 on host 0 of 2", rank)) &&
                   Catch::Contains("timed out"));
  }
}

}  // namespace
}  // namespace herd::collectives
