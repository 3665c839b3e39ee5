// Encoding and decoding of the per-cycle agreement vector (see cycle_bits.h).
// Background thread only.
//
// Word 0 holds the inverted flags (bit 0: has_uncached, bit 1: shutdown,
// bit 2: stall_due, bit 3: wants_ready_ranks, bit 4: autotune_decision).
// Words [1, 1 + n) hold the inverted invalid bits and words [1 + n, 1 + 2n)
// the ready bits, n = ceil(capacity / 64); slot s is bit s % 64 of word
// s / 64 of its part. Bits past `capacity` in the last word are encoded as
// the value that means "nothing" after the AND (1 in inverted parts, 0 in the
// ready part) and are masked off again on decode, so they can never show up
// as phantom slots.
#include "src/cycle_bits.h"

#include "common/enforce.h"

namespace herd::detail {
namespace {

constexpr int kBitsPerWord = 64;
constexpr uint64_t kHasUncachedBit = uint64_t{1} << 0;
constexpr uint64_t kShutdownBit = uint64_t{1} << 1;
constexpr uint64_t kStallDueBit = uint64_t{1} << 2;
constexpr uint64_t kWantsReadyRanksBit = uint64_t{1} << 3;
constexpr uint64_t kAutotuneDecisionBit = uint64_t{1} << 4;

std::size_t slot_words(std::size_t capacity) {
  return (capacity + kBitsPerWord - 1) / kBitsPerWord;
}

uint64_t bit_of(uint32_t slot) { return uint64_t{1} << (slot % kBitsPerWord); }

// Appends to *slots, ascending, every slot < capacity whose bit in
// words[first, first + slot_words(capacity)) equals `wanted`. Whole words
// with no such bit are skipped, so a large, mostly idle cache costs one test
// per 64 slots.
void collect_slots(const std::vector<uint64_t>& words, std::size_t first, std::size_t capacity,
                   bool wanted, std::vector<uint32_t>* slots) {
  for (std::size_t w = 0; w < slot_words(capacity); ++w) {
    uint64_t hits = wanted ? words[first + w] : ~words[first + w];
    const std::size_t base = w * kBitsPerWord;
    for (std::size_t bit = 0; hits != 0 && base + bit < capacity; ++bit, hits >>= 1) {
      if (hits & 1U) slots->push_back(static_cast<uint32_t>(base + bit));
    }
  }
}

// The first word of the per-rank ready parts.
std::size_t per_rank_first(std::size_t capacity, int num_ranks) {
  return cycle_bits_words(capacity, num_ranks, /*per_rank_ready=*/false);
}

}  // namespace

std::size_t cycle_bits_words(std::size_t capacity, int num_ranks, bool per_rank_ready) {
  const auto ranks = static_cast<std::size_t>(num_ranks);
  const std::size_t per_rank = per_rank_ready ? ranks * slot_words(capacity) : 0;
  return 1 + 2 * slot_words(capacity) + slot_words(ranks) + per_rank;
}

std::vector<uint64_t> encode_cycle_bits(const CycleBits& bits, std::size_t capacity,
                                        bool per_rank_ready) {
  const std::size_t n = slot_words(capacity);
  std::vector<uint64_t> words(cycle_bits_words(capacity, bits.num_ranks, per_rank_ready), 0);
  // Inverted parts start all ones: "not set on this rank"; so do the other
  // ranks' ready parts, which this rank leaves to them.
  for (std::size_t i = 0; i < 1 + n; ++i) words[i] = ~uint64_t{0};
  for (std::size_t i = 1 + 2 * n; i < words.size(); ++i) words[i] = ~uint64_t{0};
  if (per_rank_ready) {
    HERD_ENFORCE_LT(bits.rank, bits.num_ranks);
    const std::size_t mine =
        per_rank_first(capacity, bits.num_ranks) + static_cast<std::size_t>(bits.rank) * n;
    for (std::size_t w = 0; w < n; ++w) words[mine + w] = 0;
    for (uint32_t slot : bits.ready_slots) {
      HERD_ENFORCE_LT(slot, capacity);
      words[mine + slot / kBitsPerWord] |= bit_of(slot);
    }
  }
  if (bits.joined) {
    HERD_ENFORCE_LT(bits.rank, bits.num_ranks);
    const auto rank = static_cast<uint32_t>(bits.rank);
    words[1 + 2 * n + rank / kBitsPerWord] &= ~bit_of(rank);
  }

  if (bits.has_uncached) words[0] &= ~kHasUncachedBit;
  if (bits.shutdown) words[0] &= ~kShutdownBit;
  if (bits.stall_due) words[0] &= ~kStallDueBit;
  if (bits.wants_ready_ranks) words[0] &= ~kWantsReadyRanksBit;
  if (bits.autotune_decision) words[0] &= ~kAutotuneDecisionBit;
  for (uint32_t slot : bits.invalid_slots) {
    HERD_ENFORCE_LT(slot, capacity);
    words[1 + slot / kBitsPerWord] &= ~bit_of(slot);
  }
  for (uint32_t slot : bits.ready_slots) {
    HERD_ENFORCE_LT(slot, capacity);
    words[1 + n + slot / kBitsPerWord] |= bit_of(slot);
  }
  return words;
}

CycleAgreement decode_cycle_bits(const std::vector<uint64_t>& and_reduced, std::size_t capacity,
                                 int num_ranks, bool per_rank_ready) {
  HERD_ENFORCE_EQ(and_reduced.size(), cycle_bits_words(capacity, num_ranks, per_rank_ready));
  const std::size_t n = slot_words(capacity);
  CycleAgreement agreement;
  agreement.any_uncached = (and_reduced[0] & kHasUncachedBit) == 0;
  agreement.any_shutdown = (and_reduced[0] & kShutdownBit) == 0;
  agreement.any_stall_due = (and_reduced[0] & kStallDueBit) == 0;
  agreement.any_wants_ready_ranks = (and_reduced[0] & kWantsReadyRanksBit) == 0;
  agreement.autotune_decision = (and_reduced[0] & kAutotuneDecisionBit) == 0;
  collect_slots(and_reduced, 1, capacity, /*wanted=*/false, &agreement.invalid_anywhere);
  collect_slots(and_reduced, 1 + n, capacity, /*wanted=*/true, &agreement.ready_everywhere);
  std::vector<uint32_t> joined;
  collect_slots(and_reduced, 1 + 2 * n, static_cast<std::size_t>(num_ranks), /*wanted=*/false,
                &joined);
  agreement.joined_ranks.assign(joined.begin(), joined.end());
  if (per_rank_ready) {
    agreement.ready_by_rank.resize(static_cast<std::size_t>(num_ranks));
    const std::size_t first = per_rank_first(capacity, num_ranks);
    for (std::size_t rank = 0; rank < agreement.ready_by_rank.size(); ++rank) {
      collect_slots(and_reduced, first + rank * n, capacity, /*wanted=*/true,
                    &agreement.ready_by_rank[rank]);
    }
  }
  return agreement;
}

}  // namespace herd::detail
