// Broadcast over a Transport: the root's buffer is copied into every other
// rank's buffer, in place.
//
// Called by the runtime's background thread (one collective at a time per
// Transport). Every rank must call with the same byte count, root and
// options.
//
// Binomial tree (latency-optimal, ceil(log2 p) rounds, each message the whole
// buffer): ranks are renumbered relative to the root, vrank = (rank - root)
// mod p. In round k (mask = 2^k) every vrank below mask, which already has
// the data, sends it to vrank + mask if that is below p. After round k the
// vranks [0, 2 mask) hold the data. So vrank v > 0 receives once, in round
// floor(log2 v), from v - 2^floor(log2 v), and sends in every later round.
//
// Pipelined chain (bandwidth-optimal for large buffers): the vranks form a
// line 0 -> 1 -> ... -> p-1, and the buffer travels as segments of at most
// segment_bytes. The root sends every segment to vrank 1; every other vrank
// receives segment k from its predecessor and forwards it to its successor,
// while the receives of segments k+1, ... (kChainReceivesInFlight of them in
// all) are already posted. The step of a chain error message is the segment.
//
// broadcast() takes the binomial tree for buffers of at most
// chain_threshold_bytes, and the chain for larger ones on more than two ranks
// (on two, both are one hop and the tree sends fewer messages).
#pragma once

#include <cstddef>

#include "collectives/transport.h"
#include "common/status.h"

namespace herd::collectives {

// Above this size the chain's p - 2 extra segment latencies cost less than
// the tree's ceil(log2 p) - 1 extra copies of the whole buffer, for the few
// to few tens of ranks herd targets (see docs/collectives-algorithms.md).
constexpr std::size_t kDefaultBroadcastChainThresholdBytes = 1 << 20;
// Segment of the chain: at the threshold the buffer is 8 segments, so the
// pipeline fills quickly and a segment still amortizes its message overhead.
constexpr std::size_t kDefaultBroadcastSegmentBytes = 128 << 10;
// Posted receives of a non-root chain rank: segment k is forwarded while the
// next ones arrive.
constexpr int kChainReceivesInFlight = 4;

struct BroadcastOptions {
  // Buffers of more than this many bytes take the chain (on more than two
  // ranks); 0 sends every non-empty buffer through the chain.
  std::size_t chain_threshold_bytes = kDefaultBroadcastChainThresholdBytes;
  // Segment size of the chain; below 1 counts as 1.
  std::size_t segment_bytes = kDefaultBroadcastSegmentBytes;
};

enum class BroadcastAlgorithm {
  kBinomialTree,
  kChain,
};

// The algorithm broadcast() runs for a buffer of `bytes` bytes on `ranks`
// ranks.
BroadcastAlgorithm choose_broadcast_algorithm(std::size_t bytes, int ranks,
                                              const BroadcastOptions& options);

// Copies root's `bytes` bytes at buf into buf on every rank. root is in
// [0, p). A failed transfer returns its Status with the algorithm, step, rank
// and peer in the message.
[[nodiscard]] Status broadcast(void* buf, std::size_t bytes, int root, Transport& transport,
                               const BroadcastOptions& options = {});

[[nodiscard]] Status binomial_broadcast(void* buf, std::size_t bytes, int root,
                                        Transport& transport);

[[nodiscard]] Status chain_broadcast(void* buf, std::size_t bytes, int root, Transport& transport,
                                     std::size_t segment_bytes = kDefaultBroadcastSegmentBytes);

}  // namespace herd::collectives
