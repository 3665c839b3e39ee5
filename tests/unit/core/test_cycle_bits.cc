// Cycle bits: simulates 1..5 ranks by AND-ing their encodings, and checks
// that ready means "on every rank" while invalid and the flags mean "on some
// rank", for capacities around the 64-bit word edges.
#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "src/cycle_bits.h"

namespace herd::detail {
namespace {

std::vector<uint64_t> and_over_ranks(const std::vector<CycleBits>& ranks, std::size_t capacity) {
  std::vector<uint64_t> result(cycle_bits_words(capacity), ~uint64_t{0});
  for (const CycleBits& bits : ranks) {
    std::vector<uint64_t> words = encode_cycle_bits(bits, capacity);
    REQUIRE(words.size() == result.size());
    for (std::size_t i = 0; i < words.size(); ++i) result[i] &= words[i];
  }
  return result;
}

std::vector<uint32_t> sorted(std::set<uint32_t> slots) { return {slots.begin(), slots.end()}; }

}  // namespace

TEST_CASE("cycle bits: word counts", "[cycle_bits]") {
  CHECK(cycle_bits_words(0) == 1);
  CHECK(cycle_bits_words(1) == 3);
  CHECK(cycle_bits_words(64) == 3);
  CHECK(cycle_bits_words(65) == 5);
  CHECK(cycle_bits_words(1000) == 1 + 2 * 16);
}

TEST_CASE("cycle bits: one idle rank agrees on nothing", "[cycle_bits]") {
  for (std::size_t capacity : {0, 1, 63, 64, 65, 1000}) {
    INFO("capacity " << capacity);
    CycleAgreement agreement = decode_cycle_bits(encode_cycle_bits({}, capacity), capacity);
    CHECK_FALSE(agreement.any_uncached);
    CHECK_FALSE(agreement.any_shutdown);
    CHECK_FALSE(agreement.any_stall_due);
    CHECK(agreement.ready_everywhere.empty());
    CHECK(agreement.invalid_anywhere.empty());
  }
}

TEST_CASE("cycle bits: unused bits never become phantom slots", "[cycle_bits]") {
  // All ones and all zeros are what a corrupt or careless encoding would
  // leave past the last slot; decode must only report slots < capacity.
  for (std::size_t capacity : {1, 63, 65, 1000}) {
    INFO("capacity " << capacity);
    std::vector<uint64_t> ones(cycle_bits_words(capacity), ~uint64_t{0});
    CycleAgreement agreement = decode_cycle_bits(ones, capacity);
    CHECK(agreement.ready_everywhere.size() == capacity);
    CHECK(agreement.ready_everywhere.back() == capacity - 1);
    CHECK(agreement.invalid_anywhere.empty());

    std::vector<uint64_t> zeros(cycle_bits_words(capacity), 0);
    agreement = decode_cycle_bits(zeros, capacity);
    CHECK(agreement.any_uncached);
    CHECK(agreement.any_shutdown);
    CHECK(agreement.any_stall_due);
    CHECK(agreement.ready_everywhere.empty());
    CHECK(agreement.invalid_anywhere.size() == capacity);
    CHECK(agreement.invalid_anywhere.back() == capacity - 1);
  }
}

TEST_CASE("cycle bits: capacity 0 still carries the flags", "[cycle_bits]") {
  CycleBits quiet;
  CycleBits busy;
  busy.has_uncached = true;
  CycleBits leaving;
  leaving.shutdown = true;
  CycleAgreement agreement = decode_cycle_bits(and_over_ranks({quiet, busy}, 0), 0);
  CHECK(agreement.any_uncached);
  CHECK_FALSE(agreement.any_shutdown);
  agreement = decode_cycle_bits(and_over_ranks({quiet, leaving, quiet}, 0), 0);
  CHECK_FALSE(agreement.any_uncached);
  CHECK(agreement.any_shutdown);
  CHECK_FALSE(agreement.any_stall_due);
  CycleBits stalled;
  stalled.stall_due = true;
  agreement = decode_cycle_bits(and_over_ranks({quiet, quiet, stalled}, 0), 0);
  CHECK(agreement.any_stall_due);
  CHECK_FALSE(agreement.any_shutdown);
  CHECK_FALSE(agreement.any_uncached);
  CHECK_FALSE(agreement.autotune_decision);
  CycleBits deciding;
  deciding.autotune_decision = true;
  agreement = decode_cycle_bits(and_over_ranks({deciding, quiet, quiet}, 0), 0);
  CHECK(agreement.autotune_decision);
  CHECK_FALSE(agreement.any_wants_ready_ranks);
  CHECK_FALSE(agreement.any_stall_due);
  CHECK_FALSE(agreement.any_shutdown);
  CHECK_FALSE(agreement.any_uncached);
}

TEST_CASE("cycle bits: the AND over 1..5 ranks", "[cycle_bits]") {
  std::mt19937 rng(42);
  for (std::size_t capacity : {1, 63, 64, 65, 1000}) {
    for (int num_ranks = 1; num_ranks <= 5; ++num_ranks) {
      for (int trial = 0; trial < 20; ++trial) {
        INFO("capacity " << capacity << ", ranks " << num_ranks << ", trial " << trial);
        std::uniform_int_distribution<uint32_t> pick_slot(0, static_cast<uint32_t>(capacity - 1));
        std::bernoulli_distribution rarely(0.2);
        // A set of slots every rank has ready (so some are ready everywhere),
        // plus per-rank extras; always include the edge slots.
        std::set<uint32_t> common = {0, static_cast<uint32_t>(capacity - 1)};
        for (int i = 0; i < 5; ++i) common.insert(pick_slot(rng));

        std::vector<CycleBits> ranks(static_cast<std::size_t>(num_ranks));
        std::set<uint32_t> expected_invalid;
        bool any_uncached = false;
        bool any_shutdown = false;
        bool any_stall_due = false;
        bool autotune_decision = false;
        std::vector<std::set<uint32_t>> ready_by_rank;
        for (CycleBits& bits : ranks) {
          std::set<uint32_t> ready = common;
          for (int i = 0; i < 4; ++i) ready.insert(pick_slot(rng));
          if (rarely(rng)) ready.erase(static_cast<uint32_t>(capacity - 1));
          std::set<uint32_t> invalid;
          if (rarely(rng)) invalid.insert(pick_slot(rng));
          if (rarely(rng)) invalid.insert(static_cast<uint32_t>(capacity - 1));
          bits.has_uncached = rarely(rng);
          bits.shutdown = rarely(rng);
          bits.stall_due = rarely(rng);
          bits.autotune_decision = rarely(rng);
          bits.ready_slots.assign(ready.begin(), ready.end());
          std::shuffle(bits.ready_slots.begin(), bits.ready_slots.end(), rng);  // order is free
          bits.invalid_slots.assign(invalid.begin(), invalid.end());
          any_uncached = any_uncached || bits.has_uncached;
          any_shutdown = any_shutdown || bits.shutdown;
          any_stall_due = any_stall_due || bits.stall_due;
          autotune_decision = autotune_decision || bits.autotune_decision;
          expected_invalid.insert(invalid.begin(), invalid.end());
          ready_by_rank.push_back(ready);
        }
        std::set<uint32_t> ready_everywhere;
        for (uint32_t slot : ready_by_rank[0]) {
          bool on_all = std::all_of(ready_by_rank.begin(), ready_by_rank.end(),
                                    [&](const std::set<uint32_t>& r) { return r.count(slot) > 0; });
          if (on_all) ready_everywhere.insert(slot);
        }

        CycleAgreement agreement = decode_cycle_bits(and_over_ranks(ranks, capacity), capacity);
        CHECK(agreement.any_uncached == any_uncached);
        CHECK(agreement.any_shutdown == any_shutdown);
        CHECK(agreement.any_stall_due == any_stall_due);
        CHECK(agreement.autotune_decision == autotune_decision);
        CHECK(agreement.ready_everywhere == sorted(ready_everywhere));
        CHECK(agreement.invalid_anywhere == sorted(expected_invalid));
      }
    }
  }
}

TEST_CASE("cycle bits: a slot ready on all but one rank is not ready", "[cycle_bits]") {
  const std::size_t capacity = 65;
  std::vector<CycleBits> ranks(4);
  for (CycleBits& bits : ranks) bits.ready_slots = {3, 63, 64};
  ranks[2].ready_slots = {3, 64};
  ranks[3].invalid_slots = {63};
  CycleAgreement agreement = decode_cycle_bits(and_over_ranks(ranks, capacity), capacity);
  CHECK(agreement.ready_everywhere == std::vector<uint32_t>{3, 64});
  CHECK(agreement.invalid_anywhere == std::vector<uint32_t>{63});
}

}  // namespace herd::detail

namespace herd::detail {

TEST_CASE("cycle bits: the joined part tells every rank which ranks joined", "[cycle_bits]") {
  for (int num_ranks : {1, 2, 5, 64, 65, 130}) {
    INFO("num_ranks " << num_ranks);
    for (std::size_t capacity : {std::size_t{0}, std::size_t{3}, std::size_t{64}}) {
      std::vector<int> expected;
      std::vector<uint64_t> anded(cycle_bits_words(capacity, num_ranks), ~uint64_t{0});
      for (int rank = 0; rank < num_ranks; ++rank) {
        CycleBits bits;
        bits.num_ranks = num_ranks;
        bits.rank = rank;
        bits.joined = rank % 3 == 1 || rank == num_ranks - 1;
        if (bits.joined) expected.push_back(rank);
        const std::vector<uint64_t> words = encode_cycle_bits(bits, capacity);
        REQUIRE(words.size() == anded.size());
        for (std::size_t i = 0; i < words.size(); ++i) anded[i] &= words[i];
      }
      const CycleAgreement agreement = decode_cycle_bits(anded, capacity, num_ranks);
      CHECK(agreement.joined_ranks == expected);
      CHECK(agreement.ready_everywhere.empty());
      CHECK_FALSE(agreement.any_uncached);
    }
  }
}

TEST_CASE("cycle bits: the per-rank parts hand every rank each rank's ready slots",
          "[cycle_bits]") {
  for (int num_ranks : {1, 2, 3, 5}) {
    for (std::size_t capacity :
         {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{130}}) {
      INFO("num_ranks " << num_ranks << " capacity " << capacity);
      CHECK(cycle_bits_words(capacity, num_ranks, true) ==
            cycle_bits_words(capacity, num_ranks) +
                static_cast<std::size_t>(num_ranks) * ((capacity + 63) / 64));
      std::mt19937 random(static_cast<unsigned>(num_ranks * 1000 + capacity));
      std::vector<std::vector<uint32_t>> expected(static_cast<std::size_t>(num_ranks));
      std::set<uint32_t> everywhere;
      for (uint32_t slot = 0; slot < capacity; ++slot) everywhere.insert(slot);
      std::vector<uint64_t> anded(cycle_bits_words(capacity, num_ranks, true), ~uint64_t{0});
      for (int rank = 0; rank < num_ranks; ++rank) {
        CycleBits bits;
        bits.num_ranks = num_ranks;
        bits.rank = rank;
        bits.wants_ready_ranks = rank == num_ranks - 1;
        std::set<uint32_t> mine;
        for (uint32_t slot = 0; slot < capacity; ++slot) {
          if (random() % 3 != 0 || slot == capacity - 1) mine.insert(slot);
        }
        bits.ready_slots = sorted(mine);
        expected[static_cast<std::size_t>(rank)] = bits.ready_slots;
        std::set<uint32_t> still;
        for (uint32_t slot : everywhere) {
          if (mine.count(slot) > 0) still.insert(slot);
        }
        everywhere = still;
        const std::vector<uint64_t> words = encode_cycle_bits(bits, capacity, true);
        REQUIRE(words.size() == anded.size());
        for (std::size_t i = 0; i < words.size(); ++i) anded[i] &= words[i];
      }
      const CycleAgreement agreement = decode_cycle_bits(anded, capacity, num_ranks, true);
      CHECK(agreement.ready_by_rank == expected);
      CHECK(agreement.ready_everywhere == sorted(everywhere));
      CHECK(agreement.any_wants_ready_ranks);
      CHECK(agreement.joined_ranks.empty());
    }
  }
}

TEST_CASE("cycle bits: without the per-rank parts no rank wants them", "[cycle_bits]") {
  CycleBits bits;
  bits.num_ranks = 2;
  bits.ready_slots = {1};
  const std::vector<uint64_t> words = encode_cycle_bits(bits, 4);
  const CycleAgreement agreement = decode_cycle_bits(words, 4, 2);
  CHECK_FALSE(agreement.any_wants_ready_ranks);
  CHECK(agreement.ready_by_rank.empty());
  CHECK(agreement.ready_everywhere == std::vector<uint32_t>{1});
}

}  // namespace herd::detail
