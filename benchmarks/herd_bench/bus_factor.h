// nccl-tests' bus bandwidth, shared by every herd-bench table:
// busbw = algbw * factor, where the factor is the share of the buffer each
// rank must send (and receive) over its link in the best algorithm, so that
// busbw compares with a link's bandwidth at any rank count. Pure functions.
#pragma once

namespace herd::bench {

// Allreduce: 2(p-1)/p. A ring sends 1/p of the buffer in each of p-1
// reduce-scatter steps and p-1 allgather steps.
inline double allreduce_bus_factor(int ranks) { return 2.0 * (ranks - 1) / ranks; }

// Allgather, reducescatter and alltoall: (p-1)/p. Each rank receives the
// p-1 blocks that are not its own (alltoall: also sends p-1), whatever the
// algorithm.
inline double block_exchange_bus_factor(int ranks) {
  return static_cast<double>(ranks - 1) / ranks;
}

// Broadcast: 1. Every rank but the root receives the whole buffer.
inline double broadcast_bus_factor(int) { return 1.0; }

}  // namespace herd::bench
