// Ring and recursive-doubling allreduce over a Transport; see allreduce.h.
//
// Runs on the caller's thread (the runtime's background thread), one
// collective at a time per Transport. Every count, offset and byte size is
// 64-bit: a buffer of more than 2^31 elements takes the same path as a small
// one, and only the transport splits at its own limits.
#include "collectives/allreduce.h"

#include <cstring>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/reduce_scatter_phase.h"
#include "collectives/ring_phases.h"
#include "collectives/tags.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives {

using detail::byte_size;
using detail::finish;
using detail::Where;

std::size_t small_allreduce_threshold(int ranks) {
  constexpr std::size_t kKiB = 1024;
  if (ranks <= 8) return 64 * kKiB;
  if (ranks <= 32) return 256 * kKiB;
  if (ranks <= 64) return 512 * kKiB;
  if (ranks <= 256) return 1024 * kKiB;
  if (ranks <= 512) return 2048 * kKiB;
  return 4096 * kKiB;
}

AllreduceAlgorithm choose_allreduce_algorithm(std::size_t bytes, int ranks,
                                              const AllreduceOptions& options) {
  const std::size_t threshold =
      options.small_message_threshold_bytes < 0
          ? small_allreduce_threshold(ranks)
          : static_cast<std::size_t>(options.small_message_threshold_bytes);
  const bool small = threshold > 0 && bytes <= threshold;
  return small && ranks > 1 ? AllreduceAlgorithm::kRecursiveDoubling : AllreduceAlgorithm::kRing;
}

namespace {

// Copies input to output (unless in place) and finishes it: the whole
// allreduce on one rank, and the tail of recursive doubling.
void copy_and_finish(const void* input, void* output, int64_t count, std::size_t element_size,
                     const FinishFn& finish) {
  if (input != output && count > 0) std::memcpy(output, input, byte_size(count, element_size));
  if (finish && count > 0) finish(output, count);
}

}  // namespace

Status allreduce(const void* input, void* output, int64_t count, std::size_t element_size,
                 const ops::ReduceFn& reduce, Transport& transport, const AllreduceOptions& options,
                 const FinishFn& finish) {
  return allreduce_with(
      choose_allreduce_algorithm(byte_size(count, element_size), transport.size(), options), input,
      output, count, element_size, reduce, transport, options, finish);
}

Status allreduce_with(AllreduceAlgorithm algorithm, const void* input, void* output, int64_t count,
                      std::size_t element_size, const ops::ReduceFn& reduce, Transport& transport,
                      const AllreduceOptions& options, const FinishFn& finish) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRecursiveDoubling: {
      HERD_RETURN_IF_ERROR(
          recursive_doubling_allreduce(input, output, count, element_size, reduce, transport));
      copy_and_finish(output, output, count, element_size, finish);
      return Status::ok();
    }
    case AllreduceAlgorithm::kRing: break;
  }
  return ring_allreduce(input, output, count, element_size, reduce, transport,
                        options.segment_bytes, finish);
}

Status allreduce(void* buf, int64_t count, std::size_t element_size, const ops::ReduceFn& reduce,
                 Transport& transport, const AllreduceOptions& options) {
  return allreduce(buf, buf, count, element_size, reduce, transport, options);
}

// Ring allreduce on p ranks: the buffer of `count` elements is cut into p
// chunks (chunk_range), the blocks of both phases, rank r owning chunk r. The
// direct reduce-scatter (reduce_scatter_phase.h) leaves rank r with chunk r
// folded in the reduction order and finished; p - 1 ring allgather steps
// (ring_phases.h) then pass the finished chunks around. Each element is
// reduced in the one order of reduction_order.h, whatever chunk and segment
// it falls in, and copied from its owner, so every rank ends with the same
// bits as recursive doubling and the shared-memory allreduce give.
Status ring_allreduce(const void* input, void* output, int64_t count, std::size_t element_size,
                      const ops::ReduceFn& reduce, Transport& transport, std::size_t segment_bytes,
                      const FinishFn& finish) {
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const int p = transport.size();
  if (p == 1 || count == 0) {
    copy_and_finish(input, output, count, element_size, finish);
    return Status::ok();
  }
  std::vector<Range> chunks;
  chunks.reserve(static_cast<std::size_t>(p));
  for (int index = 0; index < p; ++index) chunks.push_back(chunk_range(count, p, index));
  const int64_t segment_count = detail::segment_count_for(segment_bytes, element_size);
  const Range owned = chunks[static_cast<std::size_t>(transport.rank())];

  const detail::ReduceScatterPhase reduce_scatter{
      "ring allreduce", detail::kRingAllreduceReduceScatterTag, segment_count};
  HERD_RETURN_IF_ERROR(detail::direct_reduce_scatter_phase(
      input, detail::element_at(output, owned.offset, element_size), chunks, element_size, reduce,
      transport, reduce_scatter, finish));
  const detail::RingPhase allgather{"ring allreduce", detail::kRingAllreduceAllgatherTag,
                                    segment_count};
  return detail::ring_allgather_phase(output, chunks, element_size, transport, allgather);
}

Status ring_allreduce(void* buf, int64_t count, std::size_t element_size,
                      const ops::ReduceFn& reduce, Transport& transport,
                      std::size_t segment_bytes) {
  return ring_allreduce(buf, buf, count, element_size, reduce, transport, segment_bytes);
}

// Recursive doubling on any p. Let p2 be the largest power of two <= p and
// extra = p - p2.
//   Fold-in: of the first 2 * extra ranks, each even rank sends its input to
//   the odd rank above it, which combines it with its own input into output
//   and takes part for both; the even rank then only waits. Participating
//   ranks get virtual ranks 0..p2-1 (vrank = rank / 2 below 2 * extra,
//   rank - extra above).
//   Exchange: in step k (mask = 2^k) a participant swaps its current value
//   with partner vrank XOR mask and combines the two into output; after
//   log2(p2) steps every participant holds the full result. The current
//   value is the input until the first combination, output after, so the
//   input is never copied.
//   Fold-out: each odd rank below 2 * extra sends the result to its even
//   partner, which receives it into output.
// Every combination is "lower rank's value op higher rank's value", written
// to output: the lower rank computes current op scratch (the received copy),
// the higher one scratch op current. Both partners compute the same operation
// on the same operands, so all ranks end bit-identical.
Status recursive_doubling_allreduce(const void* input, void* output, int64_t count,
                                    std::size_t element_size, const ops::ReduceFn& reduce,
                                    Transport& transport) {
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  const int p = transport.size();
  if (p == 1 || count == 0) {
    copy_and_finish(input, output, count, element_size, {});
    return Status::ok();
  }
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
    HERD_RETURN_IF_ERROR(
        finish(*transport.isend(input, bytes, partner, detail::kRecursiveDoublingFoldInTag),
               fold_in, "send to", partner));
    return finish(*transport.irecv(output, bytes, partner, detail::kRecursiveDoublingFoldOutTag),
                  fold_out, "recv from", partner);
  }

  std::vector<unsigned char> scratch(bytes);
  const void* current = input;
  // Combines the partner's value, in scratch, with the current one into
  // output, in rank order.
  auto combine = [&](int partner) {
    if (rank < partner) {
      reduce(output, current, scratch.data(), count);
    } else {
      reduce(output, scratch.data(), current, count);
    }
    current = output;
  };

  if (folded) {
    const int partner = rank - 1;
    HERD_RETURN_IF_ERROR(finish(
        *transport.irecv(scratch.data(), bytes, partner, detail::kRecursiveDoublingFoldInTag),
        fold_in, "recv from", partner));
    combine(partner);
  }

  const int vrank = folded ? rank / 2 : rank - extra;
  auto real_rank = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  int step = 0;
  for (int mask = 1; mask < p2; mask <<= 1, ++step) {
    const int partner = real_rank(vrank ^ mask);
    auto receive =
        transport.irecv(scratch.data(), bytes, partner, detail::kRecursiveDoublingExchangeTag);
    auto send = transport.isend(current, bytes, partner, detail::kRecursiveDoublingExchangeTag);
    const Where exchange{kAlgorithm, "exchange", step, rank};
    Status sent = finish(*send, exchange, "send to", partner);
    Status received = finish(*receive, exchange, "recv from", partner);
    HERD_RETURN_IF_ERROR(sent);
    HERD_RETURN_IF_ERROR(received);
    combine(partner);
  }

  if (folded) {
    const int partner = rank - 1;
    HERD_RETURN_IF_ERROR(
        finish(*transport.isend(output, bytes, partner, detail::kRecursiveDoublingFoldOutTag),
               fold_out, "send to", partner));
  }
  return Status::ok();
}

Status recursive_doubling_allreduce(void* buf, int64_t count, std::size_t element_size,
                                    const ops::ReduceFn& reduce, Transport& transport) {
  return recursive_doubling_allreduce(buf, buf, count, element_size, reduce, transport);
}

}  // namespace herd::collectives
