// The direct reduce-scatter phase; see reduce_scatter_phase.h.
//
// Every count, offset and byte size is 64-bit; only the transport splits a
// message at its own limits.
#include "collectives/reduce_scatter_phase.h"

#include <algorithm>
#include <memory>

#include "collectives/reduction_order.h"
#include "collectives/thread_scratch.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives::detail {
namespace {

// Segments whose receives are in flight at once: one is folded while the
// next one arrives.
constexpr int kSegmentsInFlight = 2;

// This thread's receive slots, at least `bytes` in all (thread_scratch.h):
// every byte is received before it is read.
struct ReceiveSlotsTag {};
unsigned char* receive_slots(std::size_t bytes) { return thread_scratch<ReceiveSlotsTag>(bytes); }

}  // namespace

int64_t reduce_scatter_segment_count(const ReduceScatterPhase& phase, int ranks,
                                     std::size_t element_size) {
  HERD_ENFORCE_GE(phase.segment_count, int64_t{1});
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const std::size_t slots = static_cast<std::size_t>(kSegmentsInFlight) *
                            static_cast<std::size_t>(std::max(ranks - 1, 1));
  const auto budget_count =
      static_cast<int64_t>(kReduceScatterSlotBudgetBytes / slots / element_size);
  return std::max<int64_t>(1, std::min(phase.segment_count, budget_count));
}

// Rank r receives segment k of block r from peer j into slot
// (k mod 2) * (p - 1) + peer_index(j), peers numbered 0..p-2 skipping r; the
// fold reads rank r's own contribution from input where it lies.
Status direct_reduce_scatter_phase(const void* input, void* owned_output,
                                   const std::vector<Range>& blocks, std::size_t element_size,
                                   const ops::ReduceFn& reduce, Transport& transport,
                                   const ReduceScatterPhase& phase, const SegmentFn& finish_owned) {
  const int p = transport.size();
  HERD_ENFORCE_EQ(blocks.size(), static_cast<std::size_t>(p));
  const int rank = transport.rank();
  const int64_t segment_count = reduce_scatter_segment_count(phase, p, element_size);
  const Range own = blocks[static_cast<std::size_t>(rank)];
  const std::vector<Range> segments = split_into_segments(own, segment_count);
  const auto num_segments = static_cast<int64_t>(segments.size());
  const int peers = p - 1;
  auto peer_index = [rank](int peer) { return peer < rank ? peer : peer - 1; };

  const std::size_t slot_bytes = byte_size(std::min(segment_count, own.count), element_size);
  unsigned char* const slots =
      receive_slots(slot_bytes * static_cast<std::size_t>(kSegmentsInFlight * peers));
  auto slot = [&](int64_t k, int peer) {
    const auto index = static_cast<std::size_t>((k % kSegmentsInFlight) * peers + peer_index(peer));
    return slots + index * slot_bytes;
  };

  // receives[(k mod 2) * (p - 1) + peer_index(j)]: segment k from peer j.
  std::vector<std::unique_ptr<PendingTransfer>> receives(
      static_cast<std::size_t>(kSegmentsInFlight * peers));
  auto post_receives = [&](int64_t k) {
    const std::size_t bytes = byte_size(segments[static_cast<std::size_t>(k)].count, element_size);
    for (int peer = 0; peer < p; ++peer) {
      if (peer == rank) continue;
      const auto index =
          static_cast<std::size_t>((k % kSegmentsInFlight) * peers + peer_index(peer));
      receives[index] = transport.irecv(slot(k, peer), bytes, peer, phase.tag);
    }
  };
  for (int64_t k = 0; k < std::min<int64_t>(kSegmentsInFlight, num_segments); ++k) {
    post_receives(k);
  }

  // Peers in the order r + 1, r + 2, ...: each rank starts with a different
  // one, so the first segments do not all converge on rank 0.
  std::vector<std::vector<std::unique_ptr<PendingTransfer>>> sends(static_cast<std::size_t>(p));
  for (int distance = 1; distance < p; ++distance) {
    const int peer = wrap(rank + distance, p);
    for (const Range& segment :
         split_into_segments(blocks[static_cast<std::size_t>(peer)], segment_count)) {
      sends[static_cast<std::size_t>(peer)].push_back(
          transport.isend(element_at(input, segment.offset, element_size),
                          byte_size(segment.count, element_size), peer, phase.tag));
    }
  }

  std::vector<const void*> sources(static_cast<std::size_t>(p));
  for (int64_t k = 0; k < num_segments; ++k) {
    const Where where{phase.algorithm, "reduce-scatter", k, rank};
    Status first_failure = Status::ok();
    for (int peer = 0; peer < p; ++peer) {
      if (peer == rank) continue;
      const auto index =
          static_cast<std::size_t>((k % kSegmentsInFlight) * peers + peer_index(peer));
      Status status = finish(*receives[index], where, "recv from", peer);
      receives[index].reset();
      if (!status.is_ok() && first_failure.is_ok()) first_failure = std::move(status);
    }
    HERD_RETURN_IF_ERROR(first_failure);
    const Range& segment = segments[static_cast<std::size_t>(k)];
    for (int peer = 0; peer < p; ++peer) {
      sources[static_cast<std::size_t>(peer)] =
          peer == rank ? static_cast<const void*>(element_at(input, segment.offset, element_size))
                       : static_cast<const void*>(slot(k, peer));
    }
    void* const target = element_at(owned_output, segment.offset - own.offset, element_size);
    fold_in_reduction_order(target, sources.data(), p, segment.count, element_size, reduce);
    if (finish_owned) finish_owned(target, segment.count);
    if (k + kSegmentsInFlight < num_segments) post_receives(k + kSegmentsInFlight);
  }

  for (int distance = 1; distance < p; ++distance) {
    const int peer = wrap(rank + distance, p);
    const Where where{phase.algorithm, "reduce-scatter", 0, rank};
    HERD_RETURN_IF_ERROR(finish_all(sends[static_cast<std::size_t>(peer)], where, "send to", peer));
  }
  return Status::ok();
}

}  // namespace herd::collectives::detail
