// Ring reducescatter; see reducescatter.h.
//
// Runs on the caller's thread. Counts and offsets are 64-bit.
#include "collectives/reducescatter.h"

#include "collectives/reduce_scatter_phase.h"
#include "collectives/ring_phases.h"
#include "collectives/tags.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives {

// The blocks are consecutive ranges of buf (consecutive_ranges). Rank r owns
// block r: the direct reduce-scatter phase folds it straight into output. On
// one rank the input already is the result.
Status ring_reducescatter(void* buf, void* output, const std::vector<int64_t>& counts_per_rank,
                          std::size_t element_size, const ops::ReduceFn& reduce,
                          Transport& transport, std::size_t segment_bytes) {
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const int p = transport.size();
  const int rank = transport.rank();
  HERD_ENFORCE_EQ(counts_per_rank.size(), static_cast<std::size_t>(p));
  const std::vector<Range> blocks = detail::consecutive_ranges(counts_per_rank);
  const Range own = blocks[static_cast<std::size_t>(rank)];
  if (p == 1) {
    detail::copy_block(output, detail::element_at(buf, own.offset, element_size),
                       detail::byte_size(own.count, element_size));
    return Status::ok();
  }
  const detail::ReduceScatterPhase phase{"ring reducescatter", detail::kRingReducescatterTag,
                                         detail::segment_count_for(segment_bytes, element_size)};
  return detail::direct_reduce_scatter_phase(buf, output, blocks, element_size, reduce, transport,
                                             phase);
}

}  // namespace herd::collectives
