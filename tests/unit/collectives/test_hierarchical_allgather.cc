// The hierarchical allgather (collectives/hierarchical_allgather.h) with
// threads as ranks (hierarchical_test_util.h): for (H, L) = (2, 2), (2, 3),
// (3, 2), (4, 1), (1, 3), blocks of equal, unequal and empty sizes (a whole
// host's blocks empty, every block empty, one byte), in place and out of
// place, several calls in a row on one group through slots of one cache
// line and of the default size; every rank's output against each rank's
// bytes, a closed form of (rank, call, offset); and a rank that never
// arrives.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "collectives/hierarchical_allgather.h"
#include "hierarchical_test_util.h"

namespace herd::collectives {
namespace {

using testing::Layout;
using testing::run_hierarchical;
using testing::run_hierarchical_checked;

// The byte rank `owner` contributes at `at` of its block in call `call`.
uint8_t block_byte(int owner, int call, std::size_t at) {
  return static_cast<uint8_t>(owner * 29 + call * 13 + at * 5 + (at >> 9));
}

// Runs the calls (bytes per rank each) in a row on every rank; "" when
// every rank's every output holds every rank's block, else the first
// difference.
std::string check_allgathers(Layout layout, std::size_t slot_bytes,
                             const std::vector<std::vector<int64_t>>& calls, bool in_place) {
  return run_hierarchical_checked(
      layout, slot_bytes, [&](int rank, const HierarchicalGroup& group, std::string& failure) {
        for (std::size_t c = 0; c < calls.size(); ++c) {
          const std::vector<int64_t>& bytes = calls[c];
          std::vector<std::size_t> offsets{0};
          for (const int64_t b : bytes)
            offsets.push_back(offsets.back() + static_cast<std::size_t>(b));
          const auto me = static_cast<std::size_t>(rank);
          std::vector<uint8_t> input(static_cast<std::size_t>(bytes[me]));
          for (std::size_t at = 0; at < input.size(); ++at) {
            input[at] = block_byte(rank, static_cast<int>(c), at);
          }
          // Garbage where the others' blocks go.
          std::vector<uint8_t> output(offsets.back(), static_cast<uint8_t>(0xc3 ^ rank));
          if (in_place)
            std::copy(input.begin(), input.end(),
                      output.begin() + static_cast<std::ptrdiff_t>(offsets[me]));
          const Status status = hierarchical_allgatherv(
              in_place ? output.data() + offsets[me] : input.data(), output.data(), bytes, group,
              /*segment_bytes=*/100);
          if (!status.is_ok()) return status;
          for (std::size_t owner = 0; owner < bytes.size() && failure.empty(); ++owner) {
            for (std::size_t at = 0; at < static_cast<std::size_t>(bytes[owner]); ++at) {
              const uint8_t want = block_byte(static_cast<int>(owner), static_cast<int>(c), at);
              const uint8_t got = output[offsets[owner] + at];
              if (got != want) {
                failure =
                    fmt::format("rank {} call {}: rank {}'s byte {} of {}: expected {}, actual {}",
                                rank, c, owner, at, bytes[owner], want, got);
                break;
              }
            }
          }
        }
        return Status::ok();
      });
}

TEST_CASE("hierarchical allgather: every rank's block on every rank, equal, unequal and empty",
          "[hierarchical][allgather]") {
  for (const Layout layout :
       {Layout{2, 2}, Layout{2, 3}, Layout{3, 2}, Layout{4, 1}, Layout{1, 3}}) {
    const auto p = static_cast<std::size_t>(layout.ranks());
    std::vector<std::vector<int64_t>> calls;
    calls.emplace_back(p, 1000);
    std::vector<int64_t> growing;
    std::vector<int64_t> first_host_empty;
    for (std::size_t r = 0; r < p; ++r) {
      growing.push_back(static_cast<int64_t>(r * 777 + 1));
      first_host_empty.push_back(
          r < static_cast<std::size_t>(layout.local_size) ? 0 : static_cast<int64_t>(300 + r));
    }
    calls.push_back(growing);
    calls.push_back(first_host_empty);
    calls.emplace_back(p, 0);
    calls.emplace_back(p, 1);
    calls.emplace_back(p, 20011);
    for (const bool in_place : {true, false}) {
      for (const std::size_t slot_bytes : {std::size_t{64}, kDefaultShmSlotBytes}) {
        INFO(layout.hosts << " hosts of " << layout.local_size << ", slot bytes " << slot_bytes
                          << (in_place ? ", in place" : ", out of place"));
        CHECK(check_allgathers(layout, slot_bytes, calls, in_place) == "");
      }
    }
  }
}

TEST_CASE("hierarchical allgather fails naming a rank that never arrives",
          "[hierarchical][allgather][errors]") {
  // Local rank 1 of host 1 (rank 3) never calls: its host's local rank 0
  // fails in step 1 on the stall timeout naming it; host 0's ranks pass step
  // 1 and fail in step 2, where host 1 does not answer.
  const std::vector<Status> statuses = run_hierarchical(
      Layout{2, 2}, 256, std::chrono::milliseconds(200), std::chrono::milliseconds(1000),
      [](int rank, const HierarchicalGroup& group) {
        if (rank == 3) return Status::ok();
        const std::vector<int64_t> bytes(4, 500);
        std::vector<uint8_t> output(2000);
        return hierarchical_allgatherv(output.data() + 500 * rank, output.data(), bytes, group);
      });
  REQUIRE_FALSE(statuses[2].is_ok());
  CHECK_THAT(statuses[2].message(),
             Catch::Contains("step 1, the shared-memory allgather of the host's blocks") &&
                 Catch::Contains("local rank 0 of 2 on host 1 of 2") &&
                 Catch::Contains("rank 1 did not finish the allgather's copy-in of chunk 0 of 2 "
                                 "within 200 ms"));
  for (const int rank : {0, 1}) {
    INFO("rank " << rank);
    REQUIRE_FALSE(statuses[static_cast<std::size_t>(rank)].is_ok());
    CHECK_THAT(statuses[static_cast<std::size_t>(rank)].message(),
               Catch::Contains("step 2, the allgather across hosts") &&
                   Catch::Contains(fmt::format("local rank {} of 2 on host 0 of 2", rank)) &&
                   Catch::Contains("timed out"));
  }
}

}  // namespace
}  // namespace herd::collectives
