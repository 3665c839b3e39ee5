// Binomial-tree and chain broadcast over the in-process fabric: every rank
// count 1..9 and 15, every root, sizes of 0, 1, 7, 1000 and 100003 bytes,
// chain segments of one byte up to the default, every rank starting from its
// own pattern; the algorithm choice and the messages each algorithm sends;
// and the errors that a missing rank or sizes that disagree produce.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/broadcast.h"
#include "collectives_test_util.h"
#include "rank_checks.h"

namespace herd::collectives {
namespace {

const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15};
const std::vector<std::size_t> kSizes = {0, 1, 7, 1000, 100003};

using BroadcastFn =
    std::function<Status(void* buf, std::size_t bytes, int root, Transport& transport)>;

BroadcastFn binomial() {
  return [](void* buf, std::size_t bytes, int root, Transport& transport) {
    return binomial_broadcast(buf, bytes, root, transport);
  };
}

BroadcastFn chain(std::size_t segment_bytes) {
  return [segment_bytes](void* buf, std::size_t bytes, int root, Transport& transport) {
    return chain_broadcast(buf, bytes, root, transport, segment_bytes);
  };
}

// Byte i of rank r before the broadcast: no two ranks agree at any index, so
// a rank that kept its own byte or got another rank's shows.
unsigned char pattern(int rank, int64_t i) {
  return static_cast<unsigned char>((rank * 31 + i) % 251);
}

// "" if broadcasting `bytes` bytes from `root` leaves every rank with root's
// pattern.
std::string check_broadcast(int p, int root, std::size_t bytes, const BroadcastFn& algorithm) {
  const auto results = testing::run_ranks<unsigned char>(
      p, [&](int rank, Transport& transport, std::vector<unsigned char>& data) {
        data.resize(bytes);
        for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(rank, static_cast<int64_t>(i));
        return algorithm(data.data(), bytes, root, transport);
      });
  return testing::first_mismatch_by_rank<unsigned char>(
      results, [bytes](int) { return static_cast<int64_t>(bytes); },
      [root](int, int64_t i) { return pattern(root, i); });
}

TEST_CASE("binomial broadcast from every root", "[broadcast][binomial]") {
  for (int p : kRankCounts) {
    for (int root = 0; root < p; ++root) {
      for (std::size_t bytes : kSizes) {
        CAPTURE(p, root, bytes);
        CHECK(check_broadcast(p, root, bytes, binomial()) == "");
      }
    }
  }
}

TEST_CASE("chain broadcast from every root with tiny and default segments",
          "[broadcast][chain][sweep]") {
  for (int p : kRankCounts) {
    for (int root = 0; root < p; ++root) {
      for (std::size_t bytes : kSizes) {
        // One- and seven-byte segments of 100003 bytes make 10^5 messages a
        // hop: keep them to the smaller sizes.
        const std::vector<std::size_t> segment_sizes =
            bytes <= 1000 ? std::vector<std::size_t>{0, 1, 7, kDefaultBroadcastSegmentBytes}
                          : std::vector<std::size_t>{1000, 4096, kDefaultBroadcastSegmentBytes};
        for (std::size_t segment_bytes : segment_sizes) {
          CAPTURE(p, root, bytes, segment_bytes);
          CHECK(check_broadcast(p, root, bytes, chain(segment_bytes)) == "");
        }
      }
    }
  }
}

TEST_CASE("chain broadcast of 100003 bytes in one-byte segments", "[broadcast][chain]") {
  for (int p : {2, 3}) {
    CAPTURE(p);
    CHECK(check_broadcast(p, p - 1, 100003, chain(1)) == "");
  }
}

TEST_CASE("broadcast() picks by chain_threshold_bytes and runs that algorithm", "[broadcast]") {
  BroadcastOptions options;
  options.chain_threshold_bytes = 1000;
  options.segment_bytes = 100;
  CHECK(choose_broadcast_algorithm(1000, 4, options) == BroadcastAlgorithm::kBinomialTree);
  CHECK(choose_broadcast_algorithm(1001, 4, options) == BroadcastAlgorithm::kChain);
  CHECK(choose_broadcast_algorithm(1001, 3, options) == BroadcastAlgorithm::kChain);
  CHECK(choose_broadcast_algorithm(1001, 2, options) == BroadcastAlgorithm::kBinomialTree);
  CHECK(choose_broadcast_algorithm(1 << 30, 1, options) == BroadcastAlgorithm::kBinomialTree);
  options.chain_threshold_bytes = 0;
  CHECK(choose_broadcast_algorithm(0, 4, options) == BroadcastAlgorithm::kBinomialTree);
  CHECK(choose_broadcast_algorithm(1, 4, options) == BroadcastAlgorithm::kChain);
  const BroadcastOptions defaults;
  CHECK(choose_broadcast_algorithm(kDefaultBroadcastChainThresholdBytes, 8, defaults) ==
        BroadcastAlgorithm::kBinomialTree);
  CHECK(choose_broadcast_algorithm(kDefaultBroadcastChainThresholdBytes + 1, 8, defaults) ==
        BroadcastAlgorithm::kChain);

  // The root's sends tell the algorithms apart: on 6 ranks the tree root
  // sends ceil(log2 6) = 3 whole buffers, the chain root one message per
  // 100-byte segment.
  options.chain_threshold_bytes = 1000;
  for (const auto& [bytes, expected_root_sends] :
       std::vector<std::pair<std::size_t, int64_t>>{{1000, 3}, {1001, 11}}) {
    const int root = 4;
    std::vector<int64_t> sends(6);
    const auto results = testing::run_ranks<unsigned char>(
        6, [&](int rank, Transport& transport, std::vector<unsigned char>& data) {
          data.resize(bytes);
          for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(rank, static_cast<int64_t>(i));
          testing::CountingTransport counting(transport);
          const Status status = broadcast(data.data(), bytes, root, counting, options);
          sends[static_cast<std::size_t>(rank)] = counting.sends();
          return status;
        });
    CAPTURE(bytes);
    CHECK(testing::first_mismatch_by_rank<unsigned char>(
              results, [bytes = bytes](int) { return static_cast<int64_t>(bytes); },
              [](int, int64_t i) { return pattern(4, i); }) == "");
    CHECK(sends[root] == expected_root_sends);
  }
}

// Each rank's sends when `algorithm` broadcasts `bytes` from `root`.
std::vector<int64_t> sends_per_rank(int p, int root, std::size_t bytes,
                                    const BroadcastFn& algorithm) {
  std::vector<int64_t> sends(static_cast<std::size_t>(p));
  run_inproc_ranks(p, [&](int rank, Transport& transport) {
    std::vector<unsigned char> data(bytes);
    testing::CountingTransport counting(transport);
    if (algorithm(data.data(), bytes, root, counting).is_ok()) {
      sends[static_cast<std::size_t>(rank)] = counting.sends();
    }
  });
  return sends;
}

TEST_CASE("binomial broadcast sends p - 1 messages, ceil(log2 p) from the root",
          "[broadcast][binomial]") {
  for (int p : kRankCounts) {
    int rounds = 0;
    while ((1 << rounds) < p) ++rounds;
    for (int root : {0, p / 2, p - 1}) {
      const auto sends = sends_per_rank(p, root, 10, binomial());
      int64_t total = 0;
      for (int64_t count : sends) total += count;
      CAPTURE(p, root);
      CHECK(total == p - 1);
      CHECK(sends[static_cast<std::size_t>(root)] == rounds);
    }
  }
  CHECK(sends_per_rank(4, 1, 0, binomial()) == std::vector<int64_t>{0, 0, 0, 0});
}

TEST_CASE("chain broadcast sends every segment once along the line from the root",
          "[broadcast][chain]") {
  // 10 bytes in 4-byte segments: 3 segments. Rank root - 1 ends the line.
  CHECK(sends_per_rank(4, 0, 10, chain(4)) == std::vector<int64_t>{3, 3, 3, 0});
  CHECK(sends_per_rank(4, 2, 10, chain(4)) == std::vector<int64_t>{3, 0, 3, 3});
  CHECK(sends_per_rank(5, 4, 10, chain(5)) == std::vector<int64_t>{2, 2, 2, 0, 2});
  CHECK(sends_per_rank(3, 1, 0, chain(4)) == std::vector<int64_t>{0, 0, 0});
  CHECK(sends_per_rank(1, 0, 10, chain(4)) == std::vector<int64_t>{0});
}

TEST_CASE("broadcast with a missing rank fails naming the algorithm, step, rank and peer",
          "[broadcast][errors]") {
  auto run = [](int p, int absent, const BroadcastFn& algorithm) {
    return testing::run_for_messages(p, absent, [&](int, Transport& transport) {
      std::vector<unsigned char> data(10);
      return algorithm(data.data(), data.size(), 0, transport);
    });
  };
  // Tree from rank 0 on 4 ranks: rank 1 would forward to rank 3 in round 1.
  const auto tree = run(4, 1, binomial());
  CHECK(tree[0] == "");
  CHECK(tree[2] == "");
  CHECK_THAT(tree[3], Catch::StartsWith("binomial broadcast tree step 1 (rank 3, recv from 1): ") &&
                          Catch::Contains("timed out"));
  // Chain 0 -> 1 -> 2: rank 2 never gets segment 0 from rank 1.
  const auto line = run(3, 1, chain(4));
  CHECK(line[0] == "");
  CHECK_THAT(line[2], Catch::StartsWith("chain broadcast forward step 0 (rank 2, recv from 1): "));
}

TEST_CASE("broadcast with sizes that differ between ranks fails with both lengths",
          "[broadcast][errors]") {
  // The root (rank 0) sends 10 bytes; the others expect 12.
  auto run = [](int p, const BroadcastFn& algorithm) {
    return testing::run_for_messages(p, -1, [&](int rank, Transport& transport) {
      std::vector<unsigned char> data(rank == 0 ? 10 : 12);
      return algorithm(data.data(), data.size(), 0, transport);
    });
  };
  const auto tree = run(2, binomial());
  CHECK_THAT(tree[1], Catch::StartsWith("binomial broadcast tree step 0 (rank 1, recv from 0): ") &&
                          Catch::Contains("expected 12 bytes, got a message of 10 bytes"));
  // 4-byte segments: the root's third is 2 bytes, the others expect 4.
  const auto line = run(3, chain(4));
  CHECK_THAT(line[1], Catch::StartsWith("chain broadcast forward step 2 (rank 1, recv from 0): ") &&
                          Catch::Contains("expected 4 bytes, got a message of 2 bytes"));
  CHECK_THAT(line[2], Catch::StartsWith("chain broadcast forward step 2 (rank 2, recv from 1): "));
}

}  // namespace
}  // namespace herd::collectives
