// Allreduce algorithms over a Transport, on raw buffers, in place or from an
// input buffer into an output buffer.
//
// Called by the runtime's background thread with the fusion buffer (or a
// single tensor's output) after every rank agreed to reduce it. Every rank
// must call with the same count, element size, reduction and options.
//
// Ring (bandwidth-optimal, 2(p-1) steps): the buffer is cut into one chunk per
// rank. Reduce-scatter: in step s rank r sends chunk (r - s) mod p to its right
// neighbour and receives chunk (r - s - 1) mod p from its left neighbour,
// reducing it into its own copy; after p-1 steps rank r holds the complete
// result for chunk (r + 1) mod p. Allgather: in step s rank r sends chunk
// (r + 1 - s) mod p and receives chunk (r - s) mod p, overwriting its copy.
// Each chunk travels as segments of at most segment_bytes, so the next
// segment is in flight while the previous one is reduced.
//
// Out of place, the ring reads the input where it first needs it and never
// copies it whole into the output (see ring_phases.h); recursive doubling
// copies the input first. A `finish` function (an average's division, a
// postscale) is applied exactly once to every element of the result: by the
// ring to each segment of a rank's owned chunk as it completes, before the
// allgather spreads it, so finishing costs no extra pass over the buffer.
//
// Recursive doubling (latency-optimal, ceil(log2 p) steps, each exchanging
// the whole buffer): chosen when the buffer is at most
// small_message_threshold_bytes, by default small_allreduce_threshold(p).
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
