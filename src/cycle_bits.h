// The per-cycle agreement vector: what every rank contributes to the one
// bitwise-AND allreduce that opens each background cycle.
//
// Layout (64-bit words): [inverted flags][inverted invalid-slot bits]
// [ready-slot bits][inverted joined-rank bits, when num_ranks > 0][one part of ready-slot bits per
// rank, when per_rank_ready]. AND over ranks gives, for the
// ready bits, "ready on every rank"; for the inverted parts, by De Morgan, the complement of "set
// on some rank". So one collective answers: which cached names are ready everywhere, which cache
// slots some rank invalidated, whether any rank has requests for the coordinator, whether any
// rank is shutting down, whether any rank has a tensor whose stall check is due, and whether
// rank 0 sends an autotuning decision. In the
// per-rank parts each rank sets its own part to its ready bits and every other part to all ones,
// so the AND hands every rank each rank's ready bits: an allgather inside the same collective,
// which the timeline uses to mark when each rank became ready. Pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace herd::detail {

struct CycleBits {
  bool has_uncached = false;  // this rank has requests for the coordinator
  bool shutdown = false;      // this rank asked to shut down
  // A tensor here has waited past HERD_STALL_CHECK_TIME or HERD_STALL_SHUTDOWN_TIME and not yet
  // been through a stall round (stall_round.h) for that.
  bool stall_due = false;
  // Rank 0 only: an autotuning decision (autotune.h) follows the agreement, to
  // be applied by every rank in this cycle.
  bool autotune_decision = false;
  std::vector<uint32_t> ready_slots;    // cached names ready on this rank
  std::vector<uint32_t> invalid_slots;  // cached names this rank resubmitted with another signature
  // herd::join: with num_ranks > 0, one more part of num_ranks inverted bits,
  // where this rank (`rank`) marks whether it has joined.
  int num_ranks = 0;
  int rank = 0;
  bool joined = false;
  // This rank writes a timeline and wants to know when each rank became ready.
  bool wants_ready_ranks = false;
};

struct CycleAgreement {
  bool any_uncached = false;
  bool any_shutdown = false;
  bool any_stall_due = false;
  bool autotune_decision = false;          // every rank takes rank 0's broadcast of one
  std::vector<uint32_t> ready_everywhere;  // ascending
  std::vector<uint32_t> invalid_anywhere;  // ascending
  std::vector<int> joined_ranks;           // ascending; empty unless num_ranks > 0
  bool any_wants_ready_ranks = false;
  // With per_rank_ready: ready_by_rank[r] is rank r's ready slots, ascending.
  std::vector<std::vector<uint32_t>> ready_by_rank;
};

// Number of 64-bit words for `capacity` slots (the background loop passes
// ResponseCache::slot_bound(): only slots below it can be occupied), a
// joined part for `num_ranks` ranks and, with `per_rank_ready`, a part of
// ready bits for each of them. Every rank must pass the same `per_rank_ready`
// (the background loop agrees on it a cycle ahead).
std::size_t cycle_bits_words(std::size_t capacity, int num_ranks = 0, bool per_rank_ready = false);

// This rank's contribution; every slot must be < capacity.
std::vector<uint64_t> encode_cycle_bits(const CycleBits& bits, std::size_t capacity,
                                        bool per_rank_ready = false);

// Reads the AND of every rank's encode_cycle_bits.
CycleAgreement decode_cycle_bits(const std::vector<uint64_t>& and_reduced, std::size_t capacity,
                                 int num_ranks = 0, bool per_rank_ready = false);

}  // namespace herd::detail
