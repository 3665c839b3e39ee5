// Binomial-tree and pipelined-chain broadcast; see broadcast.h.
//
// Runs on the caller's thread. Byte counts and offsets are 64-bit; only the
// transport splits a message at its own limits.
#include "collectives/broadcast.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/tags.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives {

using detail::finish;
using detail::finish_all;
using detail::Where;
using detail::wrap;

BroadcastAlgorithm choose_broadcast_algorithm(std::size_t bytes, int ranks,
                                              const BroadcastOptions& options) {
  const bool large = bytes > options.chain_threshold_bytes;
  return large && ranks > 2 ? BroadcastAlgorithm::kChain : BroadcastAlgorithm::kBinomialTree;
}

Status broadcast(void* buf, std::size_t bytes, int root, Transport& transport,
                 const BroadcastOptions& options) {
  switch (choose_broadcast_algorithm(bytes, transport.size(), options)) {
    case BroadcastAlgorithm::kChain:
      return chain_broadcast(buf, bytes, root, transport, options.segment_bytes);
    case BroadcastAlgorithm::kBinomialTree: break;
  }
  return binomial_broadcast(buf, bytes, root, transport);
}

// In vranks: v receives in round floor(log2 v) from v - 2^floor(log2 v), the
// highest set bit of v cleared; the root (v = 0) receives nothing. Then in
// every round k above that one (every round for the root) it sends to
// v + 2^k while that is below p. All sends go out at once: the buffer no
// longer changes once it has arrived.
Status binomial_broadcast(void* buf, std::size_t bytes, int root, Transport& transport) {
  const int p = transport.size();
  HERD_ENFORCE_GE(root, 0);
  HERD_ENFORCE_LT(root, p);
  if (p == 1 || bytes == 0) return Status::ok();
  const int rank = transport.rank();
  const int vrank = wrap(rank - root, p);
  auto real_rank = [root, p](int v) { return (v + root) % p; };
  constexpr const char* kAlgorithm = "binomial broadcast";

  int round = 0;  // the round at hand: the receive's, then each send's
  int mask = 1;   // 2^round
  if (vrank > 0) {
    while (mask * 2 <= vrank) {
      mask *= 2;
      ++round;
    }
    const int parent = real_rank(vrank - mask);
    const Where where{kAlgorithm, "tree", round, rank};
    HERD_RETURN_IF_ERROR(finish(*transport.irecv(buf, bytes, parent, detail::kBinomialBroadcastTag),
                                where, "recv from", parent));
    mask *= 2;
    ++round;
  }

  struct Send {
    std::unique_ptr<PendingTransfer> transfer;
    int child;
    int round;
  };
  std::vector<Send> sends;
  for (; mask < p && vrank + mask < p; mask *= 2, ++round) {
    const int child = real_rank(vrank + mask);
    sends.push_back(
        Send{transport.isend(buf, bytes, child, detail::kBinomialBroadcastTag), child, round});
  }
  for (Send& send : sends) {
    HERD_RETURN_IF_ERROR(
        finish(*send.transfer, Where{kAlgorithm, "tree", send.round, rank}, "send to", send.child));
    send.transfer.reset();
  }
  return Status::ok();
}

// In vranks: predecessor v - 1, successor v + 1. Segment k's receive is
// posted kChainReceivesInFlight - 1 segments ahead of its use; the moment it
// completes, the forward of segment k to the successor is posted. Sends are
// waited for at the end, in order.
Status chain_broadcast(void* buf, std::size_t bytes, int root, Transport& transport,
                       std::size_t segment_bytes) {
  const int p = transport.size();
  HERD_ENFORCE_GE(root, 0);
  HERD_ENFORCE_LT(root, p);
  if (p == 1 || bytes == 0) return Status::ok();
  const int rank = transport.rank();
  const int vrank = wrap(rank - root, p);
  const int predecessor = wrap(rank - 1, p);
  const int successor = wrap(rank + 1, p);
  const bool has_predecessor = vrank > 0;
  const bool has_successor = vrank < p - 1;
  constexpr const char* kAlgorithm = "chain broadcast";

  const int64_t segment_count = std::max<int64_t>(1, static_cast<int64_t>(segment_bytes));
  const std::vector<Range> segments =
      split_into_segments(Range{0, static_cast<int64_t>(bytes)}, segment_count);
  const int64_t num_segments = static_cast<int64_t>(segments.size());
  constexpr std::size_t kByte = 1;
  auto at = [&](int64_t k) {
    return detail::element_at(buf, segments[static_cast<std::size_t>(k)].offset, kByte);
  };
  auto length = [&](int64_t k) {
    return detail::byte_size(segments[static_cast<std::size_t>(k)].count, kByte);
  };

  std::deque<std::unique_ptr<PendingTransfer>> receives;  // segments k, k+1, ...
  int64_t next_receive = 0;
  auto post_receives = [&] {
    while (has_predecessor && next_receive < num_segments &&
           static_cast<int>(receives.size()) < kChainReceivesInFlight) {
      receives.push_back(transport.irecv(at(next_receive), length(next_receive), predecessor,
                                         detail::kChainBroadcastTag));
      ++next_receive;
    }
  };

  std::vector<std::unique_ptr<PendingTransfer>> sends;
  sends.reserve(has_successor ? segments.size() : 0);
  post_receives();
  for (int64_t k = 0; k < num_segments; ++k) {
    if (has_predecessor) {
      const Where where{kAlgorithm, "forward", k, rank};
      Status status = finish(*receives.front(), where, "recv from", predecessor);
      receives.pop_front();
      HERD_RETURN_IF_ERROR(status);
      post_receives();
    }
    if (has_successor) {
      sends.push_back(transport.isend(at(k), length(k), successor, detail::kChainBroadcastTag));
    }
  }
  for (std::size_t k = 0; k < sends.size(); ++k) {
    const Where where{kAlgorithm, "forward", static_cast<int64_t>(k), rank};
    HERD_RETURN_IF_ERROR(finish(*sends[k], where, "send to", successor));
    sends[k].reset();
  }
  return Status::ok();
}

}  // namespace herd::collectives
