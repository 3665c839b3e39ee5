// Allreduce algorithms over a Transport, on raw buffers, in place or from an
// input buffer into an output buffer.
//
// Called by the runtime's background thread with the fusion buffer (or a
// single tensor's output) after every rank agreed to reduce it. Every rank
// must call with the same count, element size, reduction and options.
//
// Every algorithm here, and the shared-memory allreduce
// (collectives/shm/shm_allreduce.h), combines the ranks' values of each
// element in one fixed order (collectives/reduction_order.h): the result's
// bits depend only on the ranks' inputs, never on the element's offset in
// the buffer, the segment size, what else was fused with it or which
// algorithm ran, and every rank ends with the same bits.
//
// Ring (bandwidth-optimal): the buffer is cut into one chunk per rank, rank
// r owning chunk r. Reduce-scatter (collectives/reduce_scatter_phase.h):
// every rank sends chunk c of its input straight to rank c, which folds the
// p contributions in the reduction order, one segment of at most
// segment_bytes at a time, the next segment arriving while one is folded.
// Allgather (collectives/ring_phases.h): in p - 1 steps around the ring
// (step s: rank r sends chunk (r - s) mod p to the right and receives chunk
// (r - s - 1) mod p from the left) every rank gets every finished chunk.
// Each rank sends and receives 2 (p - 1) / p of the buffer, as in the
// classic ring.
//
// Out of place, the ring reads the input where it first needs it and never
// copies it whole into the output; recursive doubling copies the input
// first. A `finish` function (an average's division, a postscale) is applied
// exactly once to every element of the result: by the ring to each segment
// of a rank's owned chunk as it completes, before the allgather spreads it,
// so finishing costs no extra pass over the buffer.
//
// Recursive doubling (latency-optimal, ceil(log2 p) steps, each exchanging
// the whole buffer): chosen when the buffer is at most
// small_message_threshold_bytes, by default small_allreduce_threshold(p).
// Its pairwise combinations are the reduction order's tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "collectives/transport.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives {

// Segment size of the ring: big enough to amortize a message's overhead,
// small enough that reducing one overlaps receiving the next.
constexpr std::size_t kDefaultSegmentBytes = 1 << 20;
// small_message_threshold_bytes' value for "by the number of ranks".
constexpr int64_t kSmallThresholdByRanks = -1;

// The largest buffer recursive doubling runs on `ranks` ranks by default:
// below it, the ring's 2(p-1) latencies cost more than recursive doubling's
// log2(p) whole-buffer exchanges. The crossover grows about linearly with p,
// so one size cannot suit every job: 64 KiB up to 8 ranks, where measured
// rows on one machine still favour recursive doubling, then steps between
// the alpha-beta-gamma model's crossovers on a 100 Gb/s network with one and
// with eight ranks per node, up to 4 MiB from 513 on
// (docs/design/allreduce-thresholds.md derives them).
std::size_t small_allreduce_threshold(int ranks);

struct AllreduceOptions {
  std::size_t segment_bytes = kDefaultSegmentBytes;
  // Bytes; kSmallThresholdByRanks: small_allreduce_threshold(p); 0: never.
  int64_t small_message_threshold_bytes = kSmallThresholdByRanks;
};

enum class AllreduceAlgorithm {
  kRing,
  kRecursiveDoubling,
};

// The algorithm allreduce() runs for a buffer of `bytes` bytes on `ranks` ranks.
AllreduceAlgorithm choose_allreduce_algorithm(std::size_t bytes, int ranks,
                                              const AllreduceOptions& options);

// Applied to `count` finished elements at `data`; see above.
using FinishFn = std::function<void(void* data, int64_t count)>;

// Reduces input (count elements of element_size bytes) across all ranks of
// the transport into output with `reduce`, then applies `finish` (if set) to
// the result. input == output is in place; otherwise the two must not
// overlap, and input is only read. A failed transfer returns its Status with
// the step, peer and rank in the message.
[[nodiscard]] Status allreduce(const void* input, void* output, int64_t count,
                               std::size_t element_size, const ops::ReduceFn& reduce,
                               Transport& transport, const AllreduceOptions& options,
                               const FinishFn& finish = {});

// In place on buf.
[[nodiscard]] Status allreduce(void* buf, int64_t count, std::size_t element_size,
                               const ops::ReduceFn& reduce, Transport& transport,
                               const AllreduceOptions& options = {});

// allreduce() with `algorithm` instead of the one the size threshold picks
// (the runtime chooses it by measurement; every rank must pass the same).
[[nodiscard]] Status allreduce_with(AllreduceAlgorithm algorithm, const void* input, void* output,
                                    int64_t count, std::size_t element_size,
                                    const ops::ReduceFn& reduce, Transport& transport,
                                    const AllreduceOptions& options, const FinishFn& finish = {});

[[nodiscard]] Status ring_allreduce(const void* input, void* output, int64_t count,
                                    std::size_t element_size, const ops::ReduceFn& reduce,
                                    Transport& transport, std::size_t segment_bytes,
                                    const FinishFn& finish = {});

// In place on buf.
[[nodiscard]] Status ring_allreduce(void* buf, int64_t count, std::size_t element_size,
                                    const ops::ReduceFn& reduce, Transport& transport,
                                    std::size_t segment_bytes = kDefaultSegmentBytes);

// input == output is in place; otherwise they must not overlap and input is
// only read (the first exchange sends and combines it where it lies, without
// a copy into output first).
[[nodiscard]] Status recursive_doubling_allreduce(const void* input, void* output, int64_t count,
                                                  std::size_t element_size,
                                                  const ops::ReduceFn& reduce,
                                                  Transport& transport);

// In place on buf.
[[nodiscard]] Status recursive_doubling_allreduce(void* buf, int64_t count,
                                                  std::size_t element_size,
                                                  const ops::ReduceFn& reduce,
                                                  Transport& transport);

}  // namespace herd::collectives
