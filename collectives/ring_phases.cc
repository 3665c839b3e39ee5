// The allgather phase of the ring; see ring_phases.h.
//
// Every count, offset and byte size is 64-bit; only the transport splits a
// message at its own limits.
#include "collectives/ring_phases.h"

#include <algorithm>
#include <memory>

#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives::detail {
namespace {

// The ring neighbours of a rank: it receives from left and sends to right.
struct Neighbours {
  int left;
  int right;
};

// Posts a send of every segment of `block` to `peer`.
std::vector<std::unique_ptr<PendingTransfer>> send_segments(const void* buf, Range block,
                                                            std::size_t element_size,
                                                            int64_t segment_count,
                                                            Transport& transport, int peer,
                                                            int tag) {
  std::vector<std::unique_ptr<PendingTransfer>> sends;
  for (const Range& segment : split_into_segments(block, segment_count)) {
    sends.push_back(transport.isend(element_at(buf, segment.offset, element_size),
                                    byte_size(segment.count, element_size), peer, tag));
  }
  return sends;
}

}  // namespace

int64_t segment_count_for(std::size_t segment_bytes, std::size_t element_size) {
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  return std::max<int64_t>(1, static_cast<int64_t>(segment_bytes / element_size));
}

// Allgather step s of rank r: send_block = (r - s) mod p and
// recv_block = (r - s - 1) mod p differ, so all segments of both go
// out at once.
Status ring_allgather_phase(void* buf, const std::vector<Range>& blocks, std::size_t element_size,
                            Transport& transport, const RingPhase& phase) {
  const int p = transport.size();
  HERD_ENFORCE_EQ(blocks.size(), static_cast<std::size_t>(p));
  HERD_ENFORCE_GE(phase.segment_count, int64_t{1});
  const int rank = transport.rank();
  const Neighbours ring{wrap(rank - 1, p), wrap(rank + 1, p)};

  for (int step = 0; step < p - 1; ++step) {
    const Where where{phase.algorithm, "allgather", step, rank};
    const Range send_block = blocks[static_cast<std::size_t>(wrap(rank - step, p))];
    const Range recv_block = blocks[static_cast<std::size_t>(wrap(rank - step - 1, p))];

    std::vector<std::unique_ptr<PendingTransfer>> receives;
    for (const Range& segment : split_into_segments(recv_block, phase.segment_count)) {
      receives.push_back(transport.irecv(element_at(buf, segment.offset, element_size),
                                         byte_size(segment.count, element_size), ring.left,
                                         phase.tag));
    }
    auto sends = send_segments(buf, send_block, element_size, phase.segment_count, transport,
                               ring.right, phase.tag);
    HERD_RETURN_IF_ERROR(finish_all(receives, where, "recv from", ring.left));
    HERD_RETURN_IF_ERROR(finish_all(sends, where, "send to", ring.right));
  }
  return Status::ok();
}

}  // namespace herd::collectives::detail
