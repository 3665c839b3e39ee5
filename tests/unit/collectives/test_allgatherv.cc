// Ring allgatherv over the in-process fabric: every rank count 1..9 and 15,
// blocks that are uneven, empty, all empty or all on one rank, segments of
// one element up to the default, in place and out of place, with rank-unique
// inputs; the number of messages; and the errors that sizes which disagree
// between ranks or a missing rank produce.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/allgather.h"
#include "collectives/chunking.h"
#include "collectives_test_util.h"
#include "rank_checks.h"

namespace herd::collectives {
namespace {

using testing::block_of;
using testing::prefix_sum;

const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15};

// A named rule for the number of elements rank r contributes on p ranks.
struct BlockPattern {
  std::string name;
  std::function<int64_t(int p, int r)> count;
};

const std::vector<BlockPattern> kPatterns = {
    {"r*3 % 5", [](int, int r) { return int64_t{r * 3 % 5}; }},
    {"1000 + 37r", [](int, int r) { return int64_t{1000 + 37 * r}; }},
    {"all empty", [](int, int) { return int64_t{0}; }},
    {"only the last rank", [](int p, int r) { return r == p - 1 ? int64_t{5} : int64_t{0}; }},
    {"only rank 0", [](int, int r) { return r == 0 ? int64_t{9} : int64_t{0}; }},
    {"65539 in chunks", [](int p, int r) { return chunk_range(65539, p, r).count; }},
};

std::vector<int64_t> counts_of(const BlockPattern& pattern, int p) {
  std::vector<int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(pattern.count(p, r));
  return counts;
}

// Element j of rank r's block: unique over ranks and indices, never -1.
int32_t value(int rank, int64_t j) { return static_cast<int32_t>(rank * 100000 + j); }

// Runs ring_allgatherv of int32 blocks of `counts` elements; with in_place,
// each rank's input is its own block of the output.
std::string check_int32(int p, const std::vector<int64_t>& counts, std::size_t segment_bytes,
                        bool in_place) {
  std::vector<int64_t> bytes;
  for (int64_t count : counts) bytes.push_back(count * 4);
  const int64_t total = prefix_sum(counts, p);
  const auto results = testing::run_ranks<int32_t>(
      p, [&](int rank, Transport& transport, std::vector<int32_t>& out) {
        out.assign(static_cast<std::size_t>(total), -1);
        const int64_t own = counts[static_cast<std::size_t>(rank)];
        const int64_t offset = prefix_sum(counts, rank);
        std::vector<int32_t> input(static_cast<std::size_t>(own));
        for (int64_t j = 0; j < own; ++j) input[static_cast<std::size_t>(j)] = value(rank, j);
        const void* in = input.data();
        if (in_place) {
          std::copy(input.begin(), input.end(), out.begin() + offset);
          in = out.data() + offset;
        }
        return ring_allgatherv(in, out.data(), bytes, transport, segment_bytes);
      });
  return testing::first_mismatch_by_rank<int32_t>(
      results, [total](int) { return total; },
      [&counts](int, int64_t i) {
        const int block = block_of(counts, i);
        return value(block, i - prefix_sum(counts, block));
      });
}

TEST_CASE("ring allgatherv gathers uneven and empty blocks in rank order", "[allgatherv][sweep]") {
  // One int32, three, five, and the default.
  for (std::size_t segment_bytes :
       {std::size_t{4}, std::size_t{12}, std::size_t{20}, kDefaultSegmentBytes}) {
    for (int p : kRankCounts) {
      for (const BlockPattern& pattern : kPatterns) {
        // One-element segments of 65539 elements make a message each: keep
        // them to the small patterns.
        if (segment_bytes == 4 && pattern.name == "65539 in chunks") continue;
        CAPTURE(segment_bytes, p, pattern.name);
        CHECK(check_int32(p, counts_of(pattern, p), segment_bytes, false) == "");
      }
    }
  }
}

TEST_CASE("ring allgatherv in place: each rank's input already in its block",
          "[allgatherv][sweep]") {
  for (int p : kRankCounts) {
    for (const BlockPattern& pattern : kPatterns) {
      CAPTURE(p, pattern.name);
      CHECK(check_int32(p, counts_of(pattern, p), 20, true) == "");
    }
  }
}

TEST_CASE("ring allgatherv moves odd byte counts with byte-sized segments", "[allgatherv]") {
  // Blocks of r*5 % 7 bytes; segments of 0 (counts as 1), 1 and 3 bytes.
  auto byte = [](int rank, int64_t j) { return static_cast<unsigned char>((rank * 31 + j) % 251); };
  for (std::size_t segment_bytes : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    for (int p : kRankCounts) {
      std::vector<int64_t> bytes;
      for (int r = 0; r < p; ++r) bytes.push_back(r * 5 % 7);
      const int64_t total = prefix_sum(bytes, p);
      CAPTURE(segment_bytes, p);
      const auto results = testing::run_ranks<unsigned char>(
          p, [&](int rank, Transport& transport, std::vector<unsigned char>& out) {
            out.assign(static_cast<std::size_t>(total), 0xEE);
            std::vector<unsigned char> input;
            for (int64_t j = 0; j < bytes[static_cast<std::size_t>(rank)]; ++j) {
              input.push_back(byte(rank, j));
            }
            return ring_allgatherv(input.data(), out.data(), bytes, transport, segment_bytes);
          });
      CHECK(testing::first_mismatch_by_rank<unsigned char>(
                results, [total](int) { return total; },
                [&](int, int64_t i) {
                  const int block = block_of(bytes, i);
                  return byte(block, i - prefix_sum(bytes, block));
                }) == "");
    }
  }
}

TEST_CASE("ring allgatherv sends each non-empty block but the right neighbour's, once a segment",
          "[allgatherv]") {
  // Rank r sends blocks r, r-1, ..., r+2 (mod p): all but block r+1.
  for (int p : {1, 2, 3, 5, 8}) {
    std::vector<int64_t> bytes;
    for (int r = 0; r < p; ++r) bytes.push_back(r * 3 % 5 * 4);  // 0, 12, 4, 16, 8, 0, ...
    std::vector<int64_t> sends(static_cast<std::size_t>(p));
    run_inproc_ranks(p, [&](int rank, Transport& transport) {
      testing::CountingTransport counting(transport);
      std::vector<unsigned char> input(static_cast<std::size_t>(bytes[std::size_t(rank)]));
      std::vector<unsigned char> out(static_cast<std::size_t>(prefix_sum(bytes, p)));
      if (ring_allgatherv(input.data(), out.data(), bytes, counting, 8).is_ok()) {
        sends[static_cast<std::size_t>(rank)] = counting.sends();
      }
    });
    for (int rank = 0; rank < p; ++rank) {
      int64_t expected = 0;
      for (int block = 0; block < p; ++block) {
        const int64_t size = bytes[static_cast<std::size_t>(block)];
        if (p > 1 && block != (rank + 1) % p) expected += (size + 7) / 8;  // 8-byte segments
      }
      CAPTURE(p, rank);
      CHECK(sends[static_cast<std::size_t>(rank)] == expected);
    }
  }
}

TEST_CASE("ring allgatherv with block sizes that differ between ranks fails with both lengths",
          "[allgatherv][errors]") {
  // Rank 0 believes rank 1 contributes 8 bytes; rank 1 sends 12.
  const auto messages = testing::run_for_messages(2, -1, [](int rank, Transport& transport) {
    const std::vector<int64_t> bytes = {4, rank == 0 ? 8 : 12};
    std::vector<unsigned char> input(static_cast<std::size_t>(bytes[std::size_t(rank)]), 1);
    std::vector<unsigned char> out(static_cast<std::size_t>(bytes[0] + bytes[1]));
    return ring_allgatherv(input.data(), out.data(), bytes, transport, kDefaultSegmentBytes);
  });
  CHECK_THAT(messages[0], Catch::StartsWith("ring allgatherv allgather step 0 (rank 0, "
                                            "recv from 1): ") &&
                              Catch::Contains("expected 8 bytes, got a message of 12 bytes"));
  CHECK(messages[1] == "");
}

TEST_CASE("ring allgatherv with a missing rank fails naming the step, rank and peer",
          "[allgatherv][errors]") {
  const auto messages = testing::run_for_messages(3, 2, [](int rank, Transport& transport) {
    const std::vector<int64_t> bytes = {4, 4, 4};
    std::vector<unsigned char> input(4, 1);
    std::vector<unsigned char> out(12);
    return ring_allgatherv(input.data(), out.data(), bytes, transport, kDefaultSegmentBytes);
  });
  // Rank 0 waits for its left neighbour, the missing rank 2; rank 1 gets
  // block 0 in step 0 and then waits for block 2 from rank 0.
  CHECK_THAT(messages[0], Catch::StartsWith("ring allgatherv allgather step 0 (rank 0, "
                                            "recv from 2): "));
  CHECK_THAT(messages[1], Catch::StartsWith("ring allgatherv allgather step 1 (rank 1, "
                                            "recv from 0): "));
}

// Hidden (run with `test_collectives "[large]"`): an output of more than
// 2^31 bytes on 2 ranks, about 9 GB of memory.
TEST_CASE("ring allgatherv of more than 2^31 bytes", "[.][large][allgatherv]") {
  const std::vector<int64_t> bytes = {(int64_t{1} << 30) + 3, (int64_t{1} << 30) + 5};
  const int64_t total = bytes[0] + bytes[1];
  auto byte = [](int rank, int64_t j) { return static_cast<unsigned char>((j + rank) % 7); };
  std::vector<std::string> failures(2);
  run_inproc_ranks(2, [&](int rank, Transport& transport) {
    std::vector<unsigned char> out(static_cast<std::size_t>(total), 0xEE);
    const int64_t offset = rank == 0 ? 0 : bytes[0];
    for (int64_t j = 0; j < bytes[std::size_t(rank)]; ++j) {
      out[static_cast<std::size_t>(offset + j)] = byte(rank, j);
    }
    const Status status = ring_allgatherv(out.data() + offset, out.data(), bytes, transport);
    std::string& failure = failures[static_cast<std::size_t>(rank)];
    if (!status.is_ok()) failure = status.message();
    for (int64_t i = 0; i < total && failure.empty(); ++i) {
      const int expected = i < bytes[0] ? byte(0, i) : byte(1, i - bytes[0]);
      const int actual = out[static_cast<std::size_t>(i)];
      if (actual != expected) {
        failure = "rank " + std::to_string(rank) + " index " + std::to_string(i) + ": expected " +
                  std::to_string(expected) + ", actual " + std::to_string(actual);
      }
    }
  });
  CHECK(failures[0] == "");
  CHECK(failures[1] == "");
}

}  // namespace
}  // namespace herd::collectives
