// The in-process control channel: its three collectives over 1-4 thread
// ranks and several rounds, and its failure paths (ranks that pass different
// lengths or make different calls, a rank that never comes, an abort).
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "src/inproc_control_channel.h"

namespace herd::detail {
namespace {

using std::chrono::milliseconds;

// Runs body(rank, channel) on one thread per rank of `world` but `absent`
// (-1: none) and returns each rank's Status message ("" for OK).
std::vector<std::string> run_channels(InprocControlWorld& world,
                                      const std::function<Status(int, ControlChannel&)>& body,
                                      int absent = -1) {
  std::vector<std::string> messages(static_cast<std::size_t>(world.size()));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world.size(); ++rank) {
    if (rank == absent) continue;
    threads.emplace_back([&, rank, channel = world.channel(rank)] {
      messages[static_cast<std::size_t>(rank)] = body(rank, *channel).message();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return messages;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("inproc control channel: and_allreduce, gather and broadcast over several rounds",
          "[inproc_control]") {
  const int p = GENERATE(1, 2, 3, 4);
  constexpr int kRounds = 3;
  InprocControlWorld world(p);
  // results[rank][round]
  std::vector<std::vector<std::vector<uint64_t>>> anded(p);
  std::vector<std::vector<std::vector<std::vector<uint8_t>>>> gathered(p);
  std::vector<std::vector<std::vector<uint8_t>>> broadcast(p);
  const std::vector<std::string> messages = run_channels(world, [&](int rank, ControlChannel& c) {
    if (c.rank() != rank || c.size() != p) return Status::error("wrong rank or size");
    for (int round = 0; round < kRounds; ++round) {
      // Word 0: every bit but the rank's own; word 1: the round in every rank.
      std::vector<uint64_t> words = {~(uint64_t{1} << rank), static_cast<uint64_t>(round) | 0xF0};
      HERD_RETURN_IF_ERROR(c.and_allreduce(&words));
      anded[rank].push_back(words);
      // Rank r sends r + 1 bytes r, r + 1, ...; a non-root's output must
      // stay untouched.
      std::vector<uint8_t> mine;
      for (int i = 0; i <= rank; ++i) mine.push_back(static_cast<uint8_t>(rank + i + round));
      std::vector<std::vector<uint8_t>> per_rank = {{0xEE}};
      HERD_RETURN_IF_ERROR(c.gather_to_root(mine, &per_rank));
      gathered[rank].push_back(per_rank);
      std::vector<uint8_t> bytes(static_cast<std::size_t>(rank + 2), static_cast<uint8_t>(rank));
      HERD_RETURN_IF_ERROR(c.broadcast_from_root(&bytes));
      broadcast[rank].push_back(bytes);
    }
    return Status::ok();
  });
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank << " of " << p);
    REQUIRE(messages[rank] == "");
    for (int round = 0; round < kRounds; ++round) {
      INFO("round " << round);
      const uint64_t all_but_ranks = ~((uint64_t{1} << p) - 1);
      CHECK(anded[rank][round] ==
            std::vector<uint64_t>{all_but_ranks, static_cast<uint64_t>(round) | 0xF0});
      std::vector<std::vector<uint8_t>> expected_gather = {{0xEE}};
      if (rank == 0) {
        expected_gather.clear();
        for (int r = 0; r < p; ++r) {
          std::vector<uint8_t> from_r;
          for (int i = 0; i <= r; ++i) from_r.push_back(static_cast<uint8_t>(r + i + round));
          expected_gather.push_back(from_r);
        }
      }
      CHECK(gathered[rank][round] == expected_gather);
      CHECK(broadcast[rank][round] == std::vector<uint8_t>{0, 0});
    }
  }
}

TEST_CASE("inproc control channel: and_allreduce of different lengths fails on every rank",
          "[inproc_control]") {
  InprocControlWorld world(2);
  const std::vector<std::string> messages = run_channels(world, [](int rank, ControlChannel& c) {
    std::vector<uint64_t> words(static_cast<std::size_t>(2 + rank), 1);
    return c.and_allreduce(&words);
  });
  CHECK(messages[0] == "and_allreduce (control round 0): rank 0 passed 2 words, rank 1 passed 3");
  CHECK(messages[1] == "and_allreduce (control round 0): rank 1 passed 3 words, rank 0 passed 2");
}

TEST_CASE("inproc control channel: different calls in one round abort the world",
          "[inproc_control]") {
  InprocControlWorld world(2, milliseconds(5000));
  const std::vector<std::string> messages = run_channels(world, [](int rank, ControlChannel& c) {
    if (rank == 0) {
      std::vector<uint64_t> words = {1};
      HERD_RETURN_IF_ERROR(c.and_allreduce(&words));
    } else {
      // Arrive second, so that the message is known.
      std::this_thread::sleep_for(milliseconds(50));
      std::vector<uint8_t> bytes = {1};
      HERD_RETURN_IF_ERROR(c.broadcast_from_root(&bytes));
    }
    return Status::error("the call succeeded");
  });
  // Rank 1 most likely arrives second; either way both ranks fail with the
  // one reason, which names both calls.
  const std::string reasons[] = {
      "control round 0: rank 1 called broadcast_from_root, other ranks and_allreduce",
      "control round 0: rank 0 called and_allreduce, other ranks broadcast_from_root"};
  const std::string prefix0 = "rank 0: and_allreduce (control round 0) failed: ";
  const std::string prefix1 = "rank 1: broadcast_from_root (control round 0) failed: ";
  const bool first = messages[0] == prefix0 + reasons[0] && messages[1] == prefix1 + reasons[0];
  const bool second = messages[0] == prefix0 + reasons[1] && messages[1] == prefix1 + reasons[1];
  INFO(messages[0] << "\n" << messages[1]);
  CHECK((first || second));
}

TEST_CASE("inproc control channel: a rank that never calls fails the others after the timeout",
          "[inproc_control]") {
  InprocControlWorld world(3, milliseconds(1000));
  const auto began = std::chrono::steady_clock::now();
  const std::vector<std::string> messages = run_channels(
      world,
      [](int, ControlChannel& c) {
        std::vector<uint64_t> words = {1};
        return c.and_allreduce(&words);
      },
      /*absent=*/2);
  CHECK(std::chrono::steady_clock::now() - began >= milliseconds(1000));
  // Whichever of ranks 0 and 1 timed out first names rank 2 alone; the other
  // fails with its reason.
  for (int rank = 0; rank < 2; ++rank) {
    INFO(messages[rank]);
    CHECK(contains(messages[rank],
                   "waited 1000 ms in and_allreduce (control round 0) for ranks [2]"));
  }
  // The world stays aborted: a later call fails at once.
  std::vector<uint8_t> bytes;
  const Status later = world.channel(2)->broadcast_from_root(&bytes);
  CHECK(contains(later.message(), "rank 2: broadcast_from_root (control round 0) failed: rank "));
}

TEST_CASE("inproc control channel: abort fails the waiting ranks and every later call",
          "[inproc_control]") {
  InprocControlWorld world(3);
  std::thread aborter([&world] {
    std::this_thread::sleep_for(milliseconds(100));
    world.abort("rank 2 lost its connection");
    world.abort("a second reason is ignored");
  });
  const std::vector<std::string> messages = run_channels(
      world,
      [](int, ControlChannel& c) {
        std::vector<uint8_t> mine = {1, 2};
        std::vector<std::vector<uint8_t>> per_rank;
        return c.gather_to_root(mine, &per_rank);
      },
      /*absent=*/2);
  aborter.join();
  CHECK(messages[0] ==
        "rank 0: gather_to_root (control round 0) failed: rank 2 lost its connection");
  CHECK(messages[1] ==
        "rank 1: gather_to_root (control round 0) failed: rank 2 lost its connection");
  std::vector<uint64_t> words = {1};
  CHECK(world.channel(2)->and_allreduce(&words).message() ==
        "rank 2: and_allreduce (control round 0) failed: rank 2 lost its connection");
}

}  // namespace herd::detail
