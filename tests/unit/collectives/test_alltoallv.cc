// Pairwise alltoallv over the in-process fabric: every rank count 1..9 and
// 15, splits that are uneven, empty, all empty or all to one rank, with a
// rank-unique value for every (source, destination, index); the p - 1
// messages per rank; and the errors of sizes that disagree between ranks, or
// with oneself, and of a missing rank.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/alltoall.h"
#include "collectives_test_util.h"
#include "rank_checks.h"

namespace herd::collectives {
namespace {

using testing::block_of;
using testing::prefix_sum;

const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15};

// A named rule for the number of int32 elements rank `source` sends to rank
// `destination`.
struct SplitPattern {
  std::string name;
  std::function<int64_t(int source, int destination)> count;
};

const std::vector<SplitPattern> kPatterns = {
    {"(7s + 3d) % 5", [](int s, int d) { return int64_t{(7 * s + 3 * d) % 5}; }},
    {"100 + (13s + 5d) % 50", [](int s, int d) { return int64_t{100 + (13 * s + 5 * d) % 50}; }},
    {"1000 each", [](int, int) { return int64_t{1000}; }},
    {"all empty", [](int, int) { return int64_t{0}; }},
    {"only to oneself", [](int s, int d) { return s == d ? int64_t{3} : int64_t{0}; }},
    {"all to rank 1", [](int, int d) { return d == 1 ? int64_t{4} : int64_t{0}; }},
};

// Element j of the block rank `source` sends to rank `destination`.
int32_t value(int source, int destination, int64_t j) {
  return static_cast<int32_t>(source * 1000000 + destination * 10000 + j);
}

std::string check_alltoallv(int p, const SplitPattern& pattern) {
  const auto results = testing::run_ranks<int32_t>(
      p, [&](int rank, Transport& transport, std::vector<int32_t>& out) {
        std::vector<int64_t> send_counts;
        std::vector<int64_t> send_bytes;
        std::vector<int64_t> recv_bytes;
        std::vector<int32_t> input;
        for (int peer = 0; peer < p; ++peer) {
          send_counts.push_back(pattern.count(rank, peer));
          send_bytes.push_back(pattern.count(rank, peer) * 4);
          recv_bytes.push_back(pattern.count(peer, rank) * 4);
          for (int64_t j = 0; j < send_counts.back(); ++j) input.push_back(value(rank, peer, j));
        }
        out.assign(static_cast<std::size_t>(prefix_sum(recv_bytes, p) / 4), -1);
        return pairwise_alltoallv(input.data(), send_bytes, out.data(), recv_bytes, transport);
      });
  // Rank r's output is the blocks from sources 0..p-1 in order.
  auto recv_counts = [&](int rank) {
    std::vector<int64_t> counts;
    for (int source = 0; source < p; ++source) counts.push_back(pattern.count(source, rank));
    return counts;
  };
  return testing::first_mismatch_by_rank<int32_t>(
      results, [&](int rank) { return prefix_sum(recv_counts(rank), p); },
      [&](int rank, int64_t i) {
        const std::vector<int64_t> counts = recv_counts(rank);
        const int source = block_of(counts, i);
        return value(source, rank, i - prefix_sum(counts, source));
      });
}

TEST_CASE("pairwise alltoallv delivers uneven and empty blocks", "[alltoallv]") {
  for (int p : kRankCounts) {
    for (const SplitPattern& pattern : kPatterns) {
      CAPTURE(p, pattern.name);
      CHECK(check_alltoallv(p, pattern) == "");
    }
  }
}

TEST_CASE("pairwise alltoallv sends p - 1 messages per rank, empty blocks included",
          "[alltoallv]") {
  for (int p : kRankCounts) {
    std::vector<int64_t> sends(static_cast<std::size_t>(p));
    std::vector<int64_t> sent_bytes(static_cast<std::size_t>(p));
    run_inproc_ranks(p, [&](int rank, Transport& transport) {
      std::vector<int64_t> send_bytes;
      std::vector<int64_t> recv_bytes;
      for (int peer = 0; peer < p; ++peer) {
        send_bytes.push_back((7 * rank + 3 * peer) % 5);
        recv_bytes.push_back((7 * peer + 3 * rank) % 5);
      }
      std::vector<unsigned char> input(static_cast<std::size_t>(prefix_sum(send_bytes, p)));
      std::vector<unsigned char> out(static_cast<std::size_t>(prefix_sum(recv_bytes, p)));
      testing::CountingTransport counting(transport);
      if (pairwise_alltoallv(input.data(), send_bytes, out.data(), recv_bytes, counting).is_ok()) {
        sends[static_cast<std::size_t>(rank)] = counting.sends();
        sent_bytes[static_cast<std::size_t>(rank)] = counting.sent_bytes();
      }
    });
    for (int rank = 0; rank < p; ++rank) {
      CAPTURE(p, rank);
      CHECK(sends[static_cast<std::size_t>(rank)] == p - 1);
      int64_t expected_bytes = 0;
      for (int peer = 0; peer < p; ++peer) {
        if (peer != rank) expected_bytes += (7 * rank + 3 * peer) % 5;
      }
      CHECK(sent_bytes[static_cast<std::size_t>(rank)] == expected_bytes);
    }
  }
}

TEST_CASE("pairwise alltoallv with sizes that differ between ranks fails with both lengths",
          "[alltoallv][errors]") {
  // Rank 0 expects 5 bytes from rank 1, which sends it 4; everything else
  // agrees. On 3 ranks rank 0 receives from rank 1 in step 2.
  const auto messages = testing::run_for_messages(3, -1, [](int rank, Transport& transport) {
    std::vector<int64_t> send_bytes = {4, 4, 4};
    std::vector<int64_t> recv_bytes = {4, rank == 0 ? 5 : 4, 4};
    std::vector<unsigned char> input(12, 1);
    std::vector<unsigned char> out(13);
    return pairwise_alltoallv(input.data(), send_bytes, out.data(), recv_bytes, transport);
  });
  CHECK_THAT(messages[0], Catch::StartsWith("pairwise alltoallv exchange step 2 (rank 0, "
                                            "recv from 1): ") &&
                              Catch::Contains("expected 5 bytes, got a message of 4 bytes"));
  CHECK(messages[1] == "");
  CHECK(messages[2] == "");

  // A zero-byte block still travels, so a mismatch against it shows too.
  const auto empty = testing::run_for_messages(2, -1, [](int rank, Transport& transport) {
    std::vector<int64_t> send_bytes = {0, 0};
    std::vector<int64_t> recv_bytes = {0, rank == 0 ? 3 : 0};
    std::vector<unsigned char> out(3);
    return pairwise_alltoallv(nullptr, send_bytes, out.data(), recv_bytes, transport);
  });
  CHECK_THAT(empty[0], Catch::Contains("expected 3 bytes, got a message of 0 bytes"));
}

TEST_CASE("pairwise alltoallv refuses a block to oneself of another size than expected",
          "[alltoallv][errors]") {
  const auto messages = testing::run_for_messages(1, -1, [](int, Transport& transport) {
    std::vector<unsigned char> input(4);
    std::vector<unsigned char> out(6);
    return pairwise_alltoallv(input.data(), {4}, out.data(), {6}, transport);
  });
  CHECK(messages[0] ==
        "pairwise alltoallv (rank 0): sends 4 bytes to itself but expects to receive 6 from "
        "itself");
}

TEST_CASE("pairwise alltoallv with a missing rank fails naming the step, rank and peer",
          "[alltoallv][errors]") {
  const auto messages = testing::run_for_messages(3, 1, [](int, Transport& transport) {
    std::vector<unsigned char> input(3, 1);
    std::vector<unsigned char> out(3);
    return pairwise_alltoallv(input.data(), {1, 1, 1}, out.data(), {1, 1, 1}, transport);
  });
  // Rank 0 receives from rank 2 in step 1 and from the missing rank 1 in
  // step 2; rank 2 receives from rank 1 in step 1.
  CHECK_THAT(messages[0], Catch::StartsWith("pairwise alltoallv exchange step 2 (rank 0, "
                                            "recv from 1): "));
  CHECK_THAT(messages[2], Catch::StartsWith("pairwise alltoallv exchange step 1 (rank 2, "
                                            "recv from 1): "));
}

}  // namespace
}  // namespace herd::collectives
