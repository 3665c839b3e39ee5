// Ring reducescatter; see reducescatter.h.
//
// Runs on the caller's thread. Counts and offsets are 64-bit.
#include "collectives/reducescatter.h"

#include "collectives/ring_phases.h"
#include "collectives/tags.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives {

// The blocks are consecutive ranges of buf (consecutive_ranges). Rank r owns
// block r (shift 0): the reduce-scatter phase leaves the finished block r in
// its place inside buf, and one copy moves it to output (none when output is
// that place). On one rank the input already is the result.
Status ring_reducescatter(void* buf, void* output, const std::vector<int64_t>& counts_per_rank,
                          std::size_t element_size, const ops::ReduceFn& reduce,
                          Transport& transport, std::size_t segment_bytes) {
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const int p = transport.size();
  const int rank = transport.rank();
  HERD_ENFORCE_EQ(counts_per_rank.size(), static_cast<std::size_t>(p));
  const std::vector<Range> blocks = detail::consecutive_ranges(counts_per_rank);

  if (p > 1) {
    constexpr int kOwnedBlockShift = 0;
    const detail::RingPhase phase{"ring reducescatter", detail::kRingReducescatterTag,
                                  detail::segment_count_for(segment_bytes, element_size),
                                  kOwnedBlockShift};
    HERD_RETURN_IF_ERROR(detail::ring_reduce_scatter_phase(buf, buf, blocks, element_size, reduce,
                                                           transport, phase));
  }
  const Range own = blocks[static_cast<std::size_t>(rank)];
  detail::copy_block(output, detail::element_at(buf, own.offset, element_size),
                     detail::byte_size(own.count, element_size));
  return Status::ok();
}

}  // namespace herd::collectives
