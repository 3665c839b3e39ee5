// Alltoall with per-destination sizes over a Transport: every rank sends one
// block of bytes to every rank (itself included) and receives one from each.
//
// Called by the runtime's background thread (one collective at a time per
// Transport). Every rank must call with sizes that agree: what rank a sends
// to rank b (send_bytes[b] on a) is what b expects from a (recv_bytes[a] on
// b).
//
// Pairwise exchange (p - 1 steps, one send and one receive each): rank r
// first copies its own block, then in step s = 1..p-1 sends its block for
// (r + s) mod p to that rank and receives the block of (r - s) mod p from
// that rank. In every step each rank sends to one peer and receives from
// another, so no rank is the target of two senders at once. Every step
// exchanges a message, zero-byte blocks included, so that sizes that
// disagree between two ranks fail with both lengths instead of leaving a
// message unmatched.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/transport.h"
#include "common/status.h"

namespace herd::collectives {

// input holds p consecutive blocks, the one for rank d being send_bytes[d]
// bytes long; output receives p consecutive blocks, the one from rank s
// recv_bytes[s] bytes long. Both vectors have one entry per rank, each >= 0,
// and send_bytes[rank] must equal recv_bytes[rank]. input and output must not
// overlap. A failed transfer returns its Status with "pairwise alltoallv
// exchange", the step, rank and peer in the message.
[[nodiscard]] Status pairwise_alltoallv(const void* input, const std::vector<int64_t>& send_bytes,
                                        void* output, const std::vector<int64_t>& recv_bytes,
                                        Transport& transport);

}  // namespace herd::collectives
