// Ring and recursive-doubling allreduce over a Transport; see allreduce.h.
//
// Runs on the caller's thread (the runtime's background thread), one
// collective at a time per Transport. Every count, offset and byte size is
// 64-bit: a buffer of more than 2^31 elements takes the same path as a small
// one, and only the transport splits at its own limits.
#include "collectives/allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/chunking.h"
#include "common/enforce.h"

namespace herd::collectives {
namespace {

// One tag per algorithm and phase, so that a message of one phase can never
// be matched by a receive of another.
constexpr int kRingReduceScatterTag = 101;
constexpr int kRingAllgatherTag = 102;
constexpr int kRecursiveDoublingFoldInTag = 111;
constexpr int kRecursiveDoublingExchangeTag = 112;
constexpr int kRecursiveDoublingFoldOutTag = 113;

// Number of receive slots of a reduce-scatter step: one segment is reduced
// while the next one is being received.
constexpr int kReceiveSlots = 2;

unsigned char* element_at(void* buf, int64_t offset, std::size_t element_size) {
  return static_cast<unsigned char*>(buf) + static_cast<std::size_t>(offset) * element_size;
}

std::size_t byte_size(int64_t count, std::size_t element_size) {
  return static_cast<std::size_t>(count) * element_size;
}

// a mod p in [0, p), for a possibly negative a.
int wrap(int a, int p) { return ((a % p) + p) % p; }

// Where a transfer runs, for its error message: "ring allreduce
// reduce-scatter step 1 (rank 2, recv from 1): ...".
struct Where {
  const char* algorithm;
  const char* phase;
  int step;
  int rank;
};

// Waits for `transfer` with `peer`; a failure gets the algorithm, phase, step,
// rank, direction ("send to" or "recv from") and peer in front.
Status finish(PendingTransfer& transfer, const Where& where, const char* direction, int peer) {
  Status status = transfer.wait();
  if (status.is_ok()) return status;
  return status.with_context(fmt::format("{} {} step {} (rank {}, {} {}): ", where.algorithm,
                                         where.phase, where.step, where.rank, direction, peer));
}

// Waits for every transfer of `transfers` with `peer`, in order, releasing
// each, and returns the first failure.
Status finish_all(std::vector<std::unique_ptr<PendingTransfer>>& transfers, const Where& where,
                  const char* direction, int peer) {
  for (auto& transfer : transfers) {
    Status status = finish(*transfer, where, direction, peer);
    transfer.reset();
    HERD_RETURN_IF_ERROR(status);
  }
  return Status::ok();
}

// The ring neighbours of a rank: it receives from left and sends to right.
struct Neighbours {
  int left;
  int right;
};

// Reduce-scatter step `step` of rank r: send chunk (r - step) mod p to the
// right neighbour and reduce chunk (r - step - 1) mod p, received from the
// left neighbour, into buf. Every segment of the send chunk is posted at
// once. The receive chunk comes through the receive slots: segment k lands in
// slot k % 2; once it has arrived it is reduced into buf while segment k + 1
// is still arriving in the other slot, and then the freed slot takes the
// receive of segment k + 2.
Status reduce_scatter_step(void* buf, int64_t count, std::size_t element_size,
                           const ops::ReduceFn& reduce, Transport& transport, int64_t segment_count,
                           std::vector<unsigned char> (&slots)[kReceiveSlots],
                           const Neighbours& ring, const Where& where) {
  const int p = transport.size();
  const Range send_chunk = chunk_range(count, p, wrap(where.rank - where.step, p));
  const Range recv_chunk = chunk_range(count, p, wrap(where.rank - where.step - 1, p));

  std::vector<std::unique_ptr<PendingTransfer>> sends;
  for (const Range& segment : split_into_segments(send_chunk, segment_count)) {
    sends.push_back(transport.isend(element_at(buf, segment.offset, element_size),
                                    byte_size(segment.count, element_size), ring.right,
                                    kRingReduceScatterTag));
  }

  const std::vector<Range> recv_segments = split_into_segments(recv_chunk, segment_count);
  const int64_t num_recv_segments = static_cast<int64_t>(recv_segments.size());
  std::unique_ptr<PendingTransfer> receives[kReceiveSlots];
  auto post_receive = [&](int64_t k) {
    const int slot = static_cast<int>(k % kReceiveSlots);
    receives[slot] =
        transport.irecv(slots[slot].data(),
                        byte_size(recv_segments[static_cast<std::size_t>(k)].count, element_size),
                        ring.left, kRingReduceScatterTag);
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
    reduce(element_at(buf, segment.offset, element_size), slots[slot].data(), segment.count);
    if (k + kReceiveSlots < num_recv_segments) post_receive(k + kReceiveSlots);
  }
  return finish_all(sends, where, "send to", ring.right);
}

// Allgather step `step` of rank r: send the finished chunk (r + 1 - step)
// mod p to the right neighbour and receive the finished chunk (r - step) mod p
// from the left neighbour straight into buf, overwriting the partial sums
// there. The two chunks differ, so all segments of both go out at once.
Status allgather_step(void* buf, int64_t count, std::size_t element_size, Transport& transport,
                      int64_t segment_count, const Neighbours& ring, const Where& where) {
  const int p = transport.size();
  const Range send_chunk = chunk_range(count, p, wrap(where.rank + 1 - where.step, p));
  const Range recv_chunk = chunk_range(count, p, wrap(where.rank - where.step, p));

  std::vector<std::unique_ptr<PendingTransfer>> receives;
  for (const Range& segment : split_into_segments(recv_chunk, segment_count)) {
    receives.push_back(transport.irecv(element_at(buf, segment.offset, element_size),
                                       byte_size(segment.count, element_size), ring.left,
                                       kRingAllgatherTag));
  }
  std::vector<std::unique_ptr<PendingTransfer>> sends;
  for (const Range& segment : split_into_segments(send_chunk, segment_count)) {
    sends.push_back(transport.isend(element_at(buf, segment.offset, element_size),
                                    byte_size(segment.count, element_size), ring.right,
                                    kRingAllgatherTag));
  }
  HERD_RETURN_IF_ERROR(finish_all(receives, where, "recv from", ring.left));
  return finish_all(sends, where, "send to", ring.right);
}

}  // namespace

AllreduceAlgorithm choose_allreduce_algorithm(std::size_t bytes, int ranks,
                                              const AllreduceOptions& options) {
  const bool small =
      options.small_message_threshold_bytes > 0 && bytes <= options.small_message_threshold_bytes;
  return small && ranks > 1 ? AllreduceAlgorithm::kRecursiveDoubling : AllreduceAlgorithm::kRing;
}

Status allreduce(void* buf, int64_t count, std::size_t element_size, const ops::ReduceFn& reduce,
                 Transport& transport, const AllreduceOptions& options) {
  if (count == 0 || transport.size() == 1) return Status::ok();
  const std::size_t bytes = byte_size(count, element_size);
  switch (choose_allreduce_algorithm(bytes, transport.size(), options)) {
    case AllreduceAlgorithm::kRecursiveDoubling:
      return recursive_doubling_allreduce(buf, count, element_size, reduce, transport);
    case AllreduceAlgorithm::kRing: break;
  }
  return ring_allreduce(buf, count, element_size, reduce, transport, options.segment_bytes);
}

// Ring allreduce on p ranks: the buffer of `count` elements is cut into p
// chunks (chunk_range), and each chunk into segments of segment_count =
// segment_bytes / element_size elements (at least one). p - 1 reduce-scatter
// steps leave rank r with the complete result of chunk (r + 1) mod p; p - 1
// allgather steps then pass the finished chunks around the ring. Each chunk
// is reduced along one path and finished on one rank, then copied, so every
// rank ends with the same bits even for non-associative float math.
Status ring_allreduce(void* buf, int64_t count, std::size_t element_size,
                      const ops::ReduceFn& reduce, Transport& transport,
                      std::size_t segment_bytes) {
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const int p = transport.size();
  if (p == 1 || count == 0) return Status::ok();
  const int rank = transport.rank();
  const Neighbours ring{wrap(rank - 1, p), wrap(rank + 1, p)};
  const int64_t segment_count =
      std::max<int64_t>(1, static_cast<int64_t>(segment_bytes / element_size));

  // Chunk 0 is the largest, so a slot of min(segment_count, its count)
  // elements holds any received segment.
  const int64_t slot_count = std::min(segment_count, chunk_range(count, p, 0).count);
  std::vector<unsigned char> slots[kReceiveSlots];
  for (auto& slot : slots) slot.resize(byte_size(slot_count, element_size));

  for (int step = 0; step < p - 1; ++step) {
    const Where where{"ring allreduce", "reduce-scatter", step, rank};
    HERD_RETURN_IF_ERROR(reduce_scatter_step(buf, count, element_size, reduce, transport,
                                             segment_count, slots, ring, where));
  }
  for (int step = 0; step < p - 1; ++step) {
    const Where where{"ring allreduce", "allgather", step, rank};
    HERD_RETURN_IF_ERROR(
        allgather_step(buf, count, element_size, transport, segment_count, ring, where));
  }
  return Status::ok();
}

// Recursive doubling on any p. Let p2 be the largest power of two <= p and
// extra = p - p2.
//   Fold-in: of the first 2 * extra ranks, each even rank sends its buffer to
//   the odd rank above it, which reduces it into its own and takes part for
//   both; the even rank then only waits. Participating ranks get virtual
//   ranks 0..p2-1 (vrank = rank / 2 below 2 * extra, rank - extra above).
//   Exchange: in step k (mask = 2^k) a participant swaps its whole buffer
//   with partner vrank XOR mask and combines the two; after log2(p2) steps
//   every participant holds the full result.
//   Fold-out: each odd rank below 2 * extra sends the result to its even
//   partner.
// Every combination is "lower rank's value op higher rank's value": the lower
// rank reduces the received copy (scratch) into buf; the higher one reduces
// its own buf into scratch and copies scratch back. Both partners compute the
// same operation on the same operands, so all ranks end bit-identical.
Status recursive_doubling_allreduce(void* buf, int64_t count, std::size_t element_size,
                                    const ops::ReduceFn& reduce, Transport& transport) {
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const int p = transport.size();
  if (p == 1 || count == 0) return Status::ok();
  const int rank = transport.rank();
  const std::size_t bytes = byte_size(count, element_size);

  int p2 = 1;
  while (p2 <= p / 2) p2 *= 2;
  const int extra = p - p2;
  const bool folded = rank < 2 * extra;  // takes part in fold-in and fold-out
  constexpr const char* kAlgorithm = "recursive doubling allreduce";
  const Where fold_in{kAlgorithm, "fold-in", 0, rank};
  const Where fold_out{kAlgorithm, "fold-out", 0, rank};

  if (folded && rank % 2 == 0) {
    const int partner = rank + 1;
    HERD_RETURN_IF_ERROR(finish(*transport.isend(buf, bytes, partner, kRecursiveDoublingFoldInTag),
                                fold_in, "send to", partner));
    return finish(*transport.irecv(buf, bytes, partner, kRecursiveDoublingFoldOutTag), fold_out,
                  "recv from", partner);
  }

  std::vector<unsigned char> scratch(bytes);
  // Combines the partner's value, in scratch, into buf in rank order.
  auto combine = [&](int partner) {
    if (rank < partner) {
      reduce(buf, scratch.data(), count);
    } else {
      reduce(scratch.data(), buf, count);
      std::memcpy(buf, scratch.data(), bytes);
    }
  };

  if (folded) {
    const int partner = rank - 1;
    HERD_RETURN_IF_ERROR(
        finish(*transport.irecv(scratch.data(), bytes, partner, kRecursiveDoublingFoldInTag),
               fold_in, "recv from", partner));
    combine(partner);
  }

  const int vrank = folded ? rank / 2 : rank - extra;
  auto real_rank = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  int step = 0;
  for (int mask = 1; mask < p2; mask <<= 1, ++step) {
    const int partner = real_rank(vrank ^ mask);
    auto receive = transport.irecv(scratch.data(), bytes, partner, kRecursiveDoublingExchangeTag);
    auto send = transport.isend(buf, bytes, partner, kRecursiveDoublingExchangeTag);
    const Where exchange{kAlgorithm, "exchange", step, rank};
    Status sent = finish(*send, exchange, "send to", partner);
    Status received = finish(*receive, exchange, "recv from", partner);
    HERD_RETURN_IF_ERROR(sent);
    HERD_RETURN_IF_ERROR(received);
    combine(partner);
  }

  if (folded) {
    const int partner = rank - 1;
    HERD_RETURN_IF_ERROR(finish(*transport.isend(buf, bytes, partner, kRecursiveDoublingFoldOutTag),
                                fold_out, "send to", partner));
  }
  return Status::ok();
}

}  // namespace herd::collectives
