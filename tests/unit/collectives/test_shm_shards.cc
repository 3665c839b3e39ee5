// The shard collectives of ShmAllreduceGroup with threads as ranks over one
// heap area. allgather_in_place: blocks of unequal sizes, empty ones, blocks
// not on cache lines, one rank holding everything, many chunks through
// slots of one cache line, the whole-slot chunks of an 8 MiB call, calls
// interleaved with allreduces on the same group (which share its slots and
// sequence numbers), bytes outside the blocks left alone. reduce_scatter:
// exact int32 sums into each rank's block only, in and out of place, the
// same block layouts and chunk counts, followed by allgathers and
// allreduces on the same group; the reduction order's bits for float sums.
// Both: a rank that never arrives.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "collectives/shm/shm_allreduce.h"
#include "collectives_test_util.h"
#include "reduction_order_reference.h"
#include "shm_thread_ranks.h"

namespace herd::collectives {
namespace {

using testing::run_shm_ranks;
using testing::statuses_without_rank2;

// The byte rank `owner` holds at `at` of its block, in call `call`.
uint8_t block_byte(int owner, int call, std::size_t at) {
  return static_cast<uint8_t>(owner * 37 + call * 11 + at * 7 + (at >> 8));
}
// What rank `rank` holds outside its own block before the call: garbage
// that no correct result keeps.
uint8_t stale_byte(int rank, std::size_t at) { return static_cast<uint8_t>(0xa5 ^ (rank + at)); }

// Rank j's block in a call with `offsets` (p + 1 of them) is bytes
// [offsets[j], offsets[j + 1]) of a buffer of `bytes`.
struct GatherCall {
  std::vector<std::size_t> offsets;
  std::size_t bytes;
};

// "" when every rank's buffer after each call holds every rank's block and
// its own bytes outside [offsets[0], offsets[p]); else the first difference.
// Between the allgathers every rank also runs an allreduce of
// `allreduce_count` int32 (none when 0) on the same group, checked too.
std::string run_allgathers(int p, std::size_t slot_bytes, const std::vector<GatherCall>& calls,
                           int64_t allreduce_count) {
  std::vector<std::string> failures(static_cast<std::size_t>(p));
  run_shm_ranks(
      p, p, slot_bytes, std::chrono::seconds(60), [&](int rank, ShmAllreduceGroup& group) {
        std::string& failure = failures[static_cast<std::size_t>(rank)];
        // A wrong byte is recorded and the calls go on, so that every rank
        // runs them all and none waits for a peer that stopped.
        std::string wrong;
        for (std::size_t c = 0; c < calls.size(); ++c) {
          const GatherCall& call = calls[c];
          const int call_index = static_cast<int>(c);
          std::vector<uint8_t> buffer(call.bytes);
          const auto owner_of = [&](std::size_t at) {
            for (int j = 0; j < p; ++j) {
              if (at >= call.offsets[static_cast<std::size_t>(j)] &&
                  at < call.offsets[static_cast<std::size_t>(j) + 1]) {
                return j;
              }
            }
            return -1;
          };
          for (std::size_t at = 0; at < call.bytes; ++at) {
            const int owner = owner_of(at);
            buffer[at] = owner == rank
                             ? block_byte(owner, call_index,
                                          at - call.offsets[static_cast<std::size_t>(owner)])
                             : stale_byte(rank, at);
          }
          const Status status = group.allgather_in_place(buffer.data(), call.offsets.data());
          if (!status.is_ok()) {
            failure = fmt::format("rank {} call {} failed: {}", rank, c, status.message());
            break;
          }
          for (std::size_t at = 0; at < call.bytes; ++at) {
            const int owner = owner_of(at);
            const uint8_t want =
                owner < 0 ? stale_byte(rank, at)
                          : block_byte(owner, call_index,
                                       at - call.offsets[static_cast<std::size_t>(owner)]);
            if (buffer[at] != want && wrong.empty()) {
              wrong = fmt::format(
                  "rank {} call {} byte {} of {} (rank {}'s block): expected {}, "
                  "actual {}",
                  rank, c, at, call.bytes, owner, want, buffer[at]);
              break;
            }
          }
          if (allreduce_count == 0) continue;
          // rank + i + c summed over p ranks: p(p-1)/2 + p(i + c).
          std::vector<int32_t> values(static_cast<std::size_t>(allreduce_count));
          for (int64_t i = 0; i < allreduce_count; ++i) {
            values[static_cast<std::size_t>(i)] = static_cast<int32_t>(rank + i + call_index);
          }
          const Status reduced = group.allreduce(values.data(), values.data(), allreduce_count,
                                                 sizeof(int32_t), testing::int32_sum());
          if (!reduced.is_ok()) {
            failure = fmt::format("rank {} allreduce after call {} failed: {}", rank, c,
                                  reduced.message());
            break;
          }
          for (int64_t i = 0; i < allreduce_count; ++i) {
            const auto want = static_cast<int32_t>(p * (p - 1) / 2 + p * (i + call_index));
            if (values[static_cast<std::size_t>(i)] != want && wrong.empty()) {
              wrong =
                  fmt::format("rank {} allreduce after call {} index {}: expected {}, actual {}",
                              rank, c, i, want, values[static_cast<std::size_t>(i)]);
              break;
            }
          }
        }
        if (failure.empty()) failure = wrong;
      });
  for (const std::string& failure : failures) {
    if (!failure.empty()) return failure;
  }
  return "";
}

// Blocks of the given sizes one after the other from byte `first`, in a
// buffer with `tail` bytes after the last.
GatherCall blocks(const std::vector<std::size_t>& sizes, std::size_t first = 0,
                  std::size_t tail = 0) {
  GatherCall call{{first}, 0};
  for (std::size_t size : sizes) call.offsets.push_back(call.offsets.back() + size);
  call.bytes = call.offsets.back() + tail;
  return call;
}

TEST_CASE("shm allgather: equal, unequal, empty and unaligned blocks on 1 to 5 ranks",
          "[shm][allgather]") {
  for (int p = 1; p <= 5; ++p) {
    std::vector<GatherCall> calls;
    std::vector<std::size_t> equal(static_cast<std::size_t>(p), 256);
    std::vector<std::size_t> growing;
    std::vector<std::size_t> every_other_empty;
    std::vector<std::size_t> only_last(static_cast<std::size_t>(p), 0);
    std::vector<std::size_t> none(static_cast<std::size_t>(p), 0);
    for (int j = 0; j < p; ++j) {
      growing.push_back(static_cast<std::size_t>(j * 301 + 3));
      every_other_empty.push_back(j % 2 == 0 ? 0 : static_cast<std::size_t>(97 * (j + 1)));
    }
    only_last.back() = 1000;
    calls.push_back(blocks(equal));
    calls.push_back(blocks(growing, 5, 13));
    calls.push_back(blocks(every_other_empty, 1, 1));
    calls.push_back(blocks(only_last));
    calls.push_back(blocks(none, 7, 7));
    calls.push_back(blocks(std::vector<std::size_t>(static_cast<std::size_t>(p), 1), 3));
    for (std::size_t slot_bytes : {std::size_t{64}, std::size_t{192}, std::size_t{4096}}) {
      INFO("p " << p << ", slot bytes " << slot_bytes);
      CHECK(run_allgathers(p, slot_bytes, calls, 0) == "");
    }
  }
}

TEST_CASE("shm allgather: many chunks, interleaved with allreduces on the same group",
          "[shm][allgather]") {
  // Slots of one cache line: blocks of 10000 to 30000 bytes take 157 to 469
  // chunks, and each allreduce in between moves the slots' parity and the
  // sequence numbers.
  for (int p : {2, 3, 4}) {
    std::vector<GatherCall> calls;
    for (int c = 0; c < 6; ++c) {
      std::vector<std::size_t> sizes;
      for (int j = 0; j < p; ++j) sizes.push_back(static_cast<std::size_t>((j + c) % p) * 10000);
      calls.push_back(blocks(sizes, static_cast<std::size_t>(c), 3));
    }
    for (int64_t allreduce_count : {int64_t{0}, int64_t{1}, int64_t{33}, int64_t{1000}}) {
      INFO("p " << p << ", allreduces of " << allreduce_count);
      CHECK(run_allgathers(p, 64, calls, allreduce_count) == "");
    }
  }
}

TEST_CASE("shm allgather: an 8 MiB call in whole slots with streaming stores", "[shm][allgather]") {
  // 9 MiB over 3 ranks streams (shm_streams_output): chunks of a whole
  // 64 KiB slot, the last block not a multiple of it.
  const std::vector<GatherCall> calls = {blocks({3 << 20, 3 << 20, (3 << 20) + 100}, 64, 64)};
  CHECK(run_allgathers(3, 64 * 1024, calls, 1000) == "");
}

TEST_CASE("shm allgather fails naming a rank that never arrives", "[shm][allgather][errors]") {
  const std::vector<Status> statuses = statuses_without_rank2([](ShmAllreduceGroup& group) {
    std::vector<uint8_t> buffer(3000);
    const std::size_t offsets[] = {0, 1000, 2000, 3000};
    return group.allgather_in_place(buffer.data(), offsets);
  });
  for (const Status& status : statuses) {
    REQUIRE_FALSE(status.is_ok());
    CHECK_THAT(status.message(),
               Catch::Contains(
                   "rank 2 did not finish the allgather's copy-in of chunk 0 of 4 within 200 ms"));
  }
}

// Blocks of whole int32 elements: `sizes` in elements from element
// `first`, as byte offsets.
std::vector<std::size_t> int32_blocks(const std::vector<std::size_t>& sizes, std::size_t first) {
  std::vector<std::size_t> offsets{first * sizeof(int32_t)};
  for (std::size_t size : sizes) offsets.push_back(offsets.back() + size * sizeof(int32_t));
  return offsets;
}

// Runs, on each of p thread-ranks, for each block layout in turn: a
// reduce_scatter of int32 sums of (rank + 1) + (i + c) % 7 over a buffer of
// `count` elements, then (checked first) allgather_in_place of the blocks,
// then an allreduce of the same input. "" when every rank's own block held
// p(p+1)/2 + p((i + c) % 7) after the reduce-scatter and the rest of its
// output what it held before, and the whole buffer that sum after the
// allgather and after the allreduce; else the first difference.
std::string run_reduce_scatters(int p, std::size_t slot_bytes,
                                const std::vector<std::vector<std::size_t>>& layouts, int64_t count,
                                bool in_place) {
  std::vector<std::string> failures(static_cast<std::size_t>(p));
  run_shm_ranks(
      p, p, slot_bytes, std::chrono::seconds(60), [&](int rank, ShmAllreduceGroup& group) {
        std::string& failure = failures[static_cast<std::size_t>(rank)];
        // A wrong value is recorded and the calls go on, so that every rank
        // runs them all and none waits for a peer that stopped.
        std::string wrong;
        const auto expect = [&](const std::vector<int32_t>& data, const std::string& what,
                                const std::function<int32_t(int64_t i)>& want) {
          for (std::size_t i = 0; i < data.size() && wrong.empty(); ++i) {
            if (data[i] != want(static_cast<int64_t>(i))) {
              wrong = fmt::format("rank {} {} index {} of {}: expected {}, actual {}", rank, what,
                                  i, data.size(), want(static_cast<int64_t>(i)), data[i]);
            }
          }
        };
        for (std::size_t c = 0; c < layouts.size(); ++c) {
          const std::vector<std::size_t>& offsets = layouts[c];
          const auto call = static_cast<int64_t>(c);
          const auto value = [&](int64_t i) {
            return static_cast<int32_t>(rank + 1 + (i + call) % 7);
          };
          const auto sum = [&](int64_t i) {
            return static_cast<int32_t>(p * (p + 1) / 2 + p * ((i + call) % 7));
          };
          const auto before = [&](int64_t i) {
            return in_place ? value(i) : static_cast<int32_t>(-1 - rank);
          };
          std::vector<int32_t> input(static_cast<std::size_t>(count));
          for (int64_t i = 0; i < count; ++i) input[static_cast<std::size_t>(i)] = value(i);
          std::vector<int32_t> output(input.size());
          for (int64_t i = 0; i < count; ++i) output[static_cast<std::size_t>(i)] = before(i);
          const int64_t own_begin =
              static_cast<int64_t>(offsets[static_cast<std::size_t>(rank)] / sizeof(int32_t));
          const int64_t own_end =
              static_cast<int64_t>(offsets[static_cast<std::size_t>(rank) + 1] / sizeof(int32_t));
          Status status =
              group.reduce_scatter(in_place ? output.data() : input.data(), output.data(),
                                   sizeof(int32_t), testing::int32_sum(), offsets.data());
          if (!status.is_ok()) {
            failure =
                fmt::format("rank {} reduce-scatter {} failed: {}", rank, c, status.message());
            return;
          }
          expect(output, fmt::format("reduce-scatter {}", c),
                 [&](int64_t i) { return i >= own_begin && i < own_end ? sum(i) : before(i); });
          // Out of place, the input is only read (in place it is `output`).
          expect(input, fmt::format("reduce-scatter {}'s input", c), value);
          // The blocks cover [offsets[0], offsets[p]); the rest was never
          // reduced anywhere, so fill it in by hand before the allgather.
          for (int64_t i = 0; i < count; ++i) {
            const auto at = static_cast<std::size_t>(i) * sizeof(int32_t);
            if (at < offsets.front() || at >= offsets.back())
              output[static_cast<std::size_t>(i)] = sum(i);
          }
          status = group.allgather_in_place(output.data(), offsets.data());
          if (!status.is_ok()) {
            failure = fmt::format("rank {} allgather {} failed: {}", rank, c, status.message());
            return;
          }
          expect(output, fmt::format("allgather after reduce-scatter {}", c), sum);
          for (int64_t i = 0; i < count; ++i) input[static_cast<std::size_t>(i)] = value(i);
          status = group.allreduce(input.data(), output.data(), count, sizeof(int32_t),
                                   testing::int32_sum());
          if (!status.is_ok()) {
            failure = fmt::format("rank {} allreduce {} failed: {}", rank, c, status.message());
            return;
          }
          expect(output, fmt::format("allreduce after reduce-scatter {}", c), sum);
        }
        failure = wrong;
      });
  for (const std::string& failure : failures) {
    if (!failure.empty()) return failure;
  }
  return "";
}

TEST_CASE("shm reduce-scatter: each rank's block only, unequal and empty blocks, 1 to 5 ranks",
          "[shm][reduce_scatter]") {
  for (int p = 1; p <= 5; ++p) {
    const auto ranks = static_cast<std::size_t>(p);
    std::vector<std::size_t> equal(ranks, 250);
    std::vector<std::size_t> growing;
    std::vector<std::size_t> every_other_empty;
    std::vector<std::size_t> only_last(ranks, 0);
    for (std::size_t j = 0; j < ranks; ++j) {
      growing.push_back(j * 301 + 3);
      every_other_empty.push_back(j % 2 == 0 ? 0 : 97 * (j + 1));
    }
    only_last.back() = 1000;
    const std::vector<std::vector<std::size_t>> layouts = {
        int32_blocks(equal, 0),
        int32_blocks(growing, 5),
        int32_blocks(every_other_empty, 1),
        int32_blocks(only_last, 0),
        int32_blocks(std::vector<std::size_t>(ranks, 0), 7),
        int32_blocks(std::vector<std::size_t>(ranks, 1), 3)};
    // A buffer with two elements past the longest layout.
    int64_t count = 0;
    for (const auto& offsets : layouts) {
      count = std::max(count, static_cast<int64_t>(offsets.back() / sizeof(int32_t)) + 2);
    }
    for (const bool in_place : {true, false}) {
      for (std::size_t slot_bytes : {std::size_t{64}, std::size_t{192}, std::size_t{4096}}) {
        INFO("p " << p << ", slot bytes " << slot_bytes << (in_place ? ", in place" : ""));
        CHECK(run_reduce_scatters(p, slot_bytes, layouts, count, in_place) == "");
      }
    }
  }
}

TEST_CASE("shm reduce-scatter: many chunks and whole slots, then allgathers and allreduces",
          "[shm][reduce_scatter]") {
  // Shards of 2^20 + 5 elements (hierarchical_shard's layout): 4 MiB, in
  // 64 KiB slots; then the same in slots of one cache line, 10007 elements.
  for (int p : {2, 3, 4}) {
    for (const auto& [count, slot_bytes] :
         {std::pair<int64_t, std::size_t>{(1 << 20) + 5, 64 * 1024},
          std::pair<int64_t, std::size_t>{10007, 64}}) {
      std::vector<std::size_t> sizes;
      for (int j = 0; j < p; ++j) {
        sizes.push_back(static_cast<std::size_t>(count / p + (j < count % p ? 1 : 0)));
      }
      INFO("p " << p << ", " << count << " elements, slot bytes " << slot_bytes);
      CHECK(run_reduce_scatters(p, slot_bytes, {int32_blocks(sizes, 0), int32_blocks(sizes, 0)},
                                count, false) == "");
    }
  }
}

TEST_CASE("shm reduce-scatter folds each element in the reduction order",
          "[shm][reduce_scatter][reduction_order]") {
  // Float sums that round differently in any other order, every rank's
  // block cut where hierarchical_shard cuts it, slots of 3 lines.
  constexpr int64_t kCount = 5003;
  for (int p = 2; p <= 6; ++p) {
    std::vector<std::vector<float>> outputs(static_cast<std::size_t>(p));
    std::vector<Status> statuses(static_cast<std::size_t>(p));
    std::vector<std::size_t> offsets;
    for (int j = 0; j <= p; ++j) {
      offsets.push_back(
          static_cast<std::size_t>(kCount / p * j + std::min<int64_t>(j, kCount % p)) *
          sizeof(float));
    }
    run_shm_ranks(p, p, 192, std::chrono::seconds(60), [&](int rank, ShmAllreduceGroup& group) {
      std::vector<float>& out = outputs[static_cast<std::size_t>(rank)];
      for (int64_t i = 0; i < kCount; ++i) out.push_back(testing::order_sensitive_value(rank, i));
      statuses[static_cast<std::size_t>(rank)] = group.reduce_scatter(
          out.data(), out.data(), sizeof(float), testing::float_sum(), offsets.data());
    });
    for (int rank = 0; rank < p; ++rank) {
      INFO("p " << p << ", rank " << rank);
      REQUIRE(statuses[static_cast<std::size_t>(rank)].is_ok());
      const std::size_t begin = offsets[static_cast<std::size_t>(rank)] / sizeof(float);
      const std::size_t end = offsets[static_cast<std::size_t>(rank) + 1] / sizeof(float);
      int64_t differences = 0;
      for (std::size_t i = begin; i < end; ++i) {
        const float want = testing::order_sensitive_sum(p, static_cast<int64_t>(i));
        differences +=
            std::memcmp(&want, &outputs[static_cast<std::size_t>(rank)][i], sizeof(float)) != 0;
      }
      CHECK(differences == 0);
    }
  }
}

TEST_CASE("shm reduce-scatter fails naming a rank that never arrives",
          "[shm][reduce_scatter][errors]") {
  const std::vector<Status> statuses = statuses_without_rank2([](ShmAllreduceGroup& group) {
    std::vector<float> buffer(300, 1.0f);
    const std::size_t offsets[] = {0, 400, 800, 1200};
    return group.reduce_scatter(buffer.data(), buffer.data(), sizeof(float), testing::float_sum(),
                                offsets);
  });
  for (const Status& status : statuses) {
    REQUIRE_FALSE(status.is_ok());
    // 256-byte chunks cut into 3 pieces of 64 bytes: 400-byte blocks take 7.
    CHECK_THAT(status.message(),
               Catch::Contains("rank 2 did not finish the reduce-scatter's copy-in of chunk 0 of 7 "
                               "within 200 ms"));
  }
}

}  // namespace
}  // namespace herd::collectives
