// Ring allgatherv; see allgather.h.
//
// Runs on the caller's thread. Counts and offsets are 64-bit.
#include "collectives/allgather.h"

#include "collectives/ring_phases.h"
#include "collectives/tags.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives {

// The blocks are consecutive byte ranges of output (consecutive_ranges, with
// one-byte elements). Rank r owns block r: it starts the allgather
// phase with its input copied there.
Status ring_allgatherv(const void* input, void* output, const std::vector<int64_t>& bytes_per_rank,
                       Transport& transport, std::size_t segment_bytes) {
  const int p = transport.size();
  const int rank = transport.rank();
  HERD_ENFORCE_EQ(bytes_per_rank.size(), static_cast<std::size_t>(p));
  const std::vector<Range> blocks = detail::consecutive_ranges(bytes_per_rank);
  constexpr std::size_t kByte = 1;

  const Range own = blocks[static_cast<std::size_t>(rank)];
  detail::copy_block(detail::element_at(output, own.offset, kByte), input,
                     detail::byte_size(own.count, kByte));
  if (p == 1) return Status::ok();
  const detail::RingPhase phase{"ring allgatherv", detail::kRingAllgathervTag,
                                detail::segment_count_for(segment_bytes, kByte)};
  return detail::ring_allgather_phase(output, blocks, kByte, transport, phase);
}

}  // namespace herd::collectives
