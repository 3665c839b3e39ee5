// The reduce-scatter and allgather phases of the ring; see ring_phases.h.
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

// Number of receive slots of a reduce-scatter step: one segment is reduced
// while the next one is being received.
constexpr int kReceiveSlots = 2;

// The receive slots of this thread's reduce-scatters, at least `bytes` each,
// kept from one call to the next and never initialized: every byte is
// received before it is read. Slots allocated per call were handed back to
// the kernel on free, so each call filled fresh pages and paid a page fault
// per 4 KiB (docs/design/ring-allreduce.md). A thread runs one
// reduce-scatter at a time, so one set per thread suffices.
using Slots = unsigned char* [kReceiveSlots];
void receive_slots(std::size_t bytes, Slots& slots) {
  thread_local std::unique_ptr<unsigned char[]> storage[kReceiveSlots];
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    for (auto& slot : storage) slot.reset(new unsigned char[bytes]);
    capacity = bytes;
  }
  for (int i = 0; i < kReceiveSlots; ++i) slots[i] = storage[i].get();
}

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

// Reduce-scatter step `where.step` of rank r, with send_block = (r + shift -
// 1 - step) mod p and recv_block = (r + shift - 2 - step) mod p. Every segment
// of send_block is posted at once, from `send_from` (the input in step 0, buf
// after). recv_block comes through the receive slots: segment k lands in slot
// k % 2; once it has arrived, buf takes input op slot while segment k + 1 is
// still arriving in the other slot, and then the freed slot takes the receive
// of segment k + 2. `finish_segment`, if set, runs on each segment once
// reduced.
Status reduce_scatter_step(const void* send_from, const void* input, void* buf, Range send_block,
                           Range recv_block, std::size_t element_size, const ops::ReduceFn& reduce,
                           Transport& transport, const RingPhase& phase, const Slots& slots,
                           const Neighbours& ring, const Where& where,
                           const SegmentFn* finish_segment) {
  auto sends = send_segments(send_from, send_block, element_size, phase.segment_count, transport,
                             ring.right, phase.tag);

  const std::vector<Range> recv_segments = split_into_segments(recv_block, phase.segment_count);
  const int64_t num_recv_segments = static_cast<int64_t>(recv_segments.size());
  std::unique_ptr<PendingTransfer> receives[kReceiveSlots];
  auto post_receive = [&](int64_t k) {
    const int slot = static_cast<int>(k % kReceiveSlots);
    receives[slot] = transport.irecv(
        slots[slot], byte_size(recv_segments[static_cast<std::size_t>(k)].count, element_size),
        ring.left, phase.tag);
  };
  for (int64_t k = 0; k < std::min<int64_t>(kReceiveSlots, num_recv_segments); ++k) {
    post_receive(k);
  }
  for (int64_t k = 0; k < num_recv_segments; ++k) {
    const int slot = static_cast<int>(k % kReceiveSlots);
    Status status = finish(*receives[slot], where, "recv from", ring.left);
    receives[slot].reset();
    HERD_RETURN_IF_ERROR(status);
    const Range& segment = recv_segments[static_cast<std::size_t>(k)];
    void* const target = element_at(buf, segment.offset, element_size);
    // Out of place, the reduction reads the input and writes buf in one
    // pass; a copy of input into buf first would be a pass of its own.
    const void* const own = input != buf ? element_at(input, segment.offset, element_size) : target;
    reduce(target, own, slots[slot], segment.count);
    if (finish_segment != nullptr) (*finish_segment)(target, segment.count);
    if (k + kReceiveSlots < num_recv_segments) post_receive(k + kReceiveSlots);
  }
  return finish_all(sends, where, "send to", ring.right);
}

}  // namespace

int64_t segment_count_for(std::size_t segment_bytes, std::size_t element_size) {
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  return std::max<int64_t>(1, static_cast<int64_t>(segment_bytes / element_size));
}

Status ring_reduce_scatter_phase(const void* input, void* buf, const std::vector<Range>& blocks,
                                 std::size_t element_size, const ops::ReduceFn& reduce,
                                 Transport& transport, const RingPhase& phase,
                                 const SegmentFn& finish_owned) {
  const int p = transport.size();
  HERD_ENFORCE_EQ(blocks.size(), static_cast<std::size_t>(p));
  HERD_ENFORCE_GE(phase.segment_count, int64_t{1});
  const int rank = transport.rank();
  const Neighbours ring{wrap(rank - 1, p), wrap(rank + 1, p)};

  // A slot holds the longest segment of any block.
  int64_t longest_block = 0;
  for (const Range& block : blocks) longest_block = std::max(longest_block, block.count);
  const int64_t slot_count = std::min(phase.segment_count, longest_block);
  Slots slots;
  receive_slots(byte_size(slot_count, element_size), slots);

  for (int step = 0; step < p - 1; ++step) {
    const Where where{phase.algorithm, "reduce-scatter", step, rank};
    const Range send_block =
        blocks[static_cast<std::size_t>(wrap(rank + phase.owned_block_shift - 1 - step, p))];
    const Range recv_block =
        blocks[static_cast<std::size_t>(wrap(rank + phase.owned_block_shift - 2 - step, p))];
    // The block received in the last step is the owned one, now complete.
    const SegmentFn* finish_here = step == p - 2 && finish_owned ? &finish_owned : nullptr;
    HERD_RETURN_IF_ERROR(reduce_scatter_step(step == 0 ? input : buf, input, buf, send_block,
                                             recv_block, element_size, reduce, transport, phase,
                                             slots, ring, where, finish_here));
  }
  return Status::ok();
}

// Allgather step s of rank r: send_block = (r + shift - s) mod p and
// recv_block = (r + shift - s - 1) mod p differ, so all segments of both go
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
    const Range send_block =
        blocks[static_cast<std::size_t>(wrap(rank + phase.owned_block_shift - step, p))];
    const Range recv_block =
        blocks[static_cast<std::size_t>(wrap(rank + phase.owned_block_shift - step - 1, p))];

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
