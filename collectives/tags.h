// The message tags of the collective algorithms, all in one list.
//
// Every algorithm and every phase of an algorithm sends with a tag of its
// own, so that a message of one phase can never be matched by a receive of
// another, even when a rank runs ahead into the next phase or the next
// collective. Included by the algorithm files of collectives/ only; a new
// algorithm takes a fresh number here.
#pragma once

namespace herd::collectives::detail {

// Ring allreduce (allreduce.cc).
constexpr int kRingAllreduceReduceScatterTag = 101;
constexpr int kRingAllreduceAllgatherTag = 102;
// Recursive-doubling allreduce (allreduce.cc).
constexpr int kRecursiveDoublingFoldInTag = 111;
constexpr int kRecursiveDoublingExchangeTag = 112;
constexpr int kRecursiveDoublingFoldOutTag = 113;
// Ring reducescatter (reducescatter.cc).
constexpr int kRingReducescatterTag = 121;
// Ring allgatherv (allgather.cc).
constexpr int kRingAllgathervTag = 131;
// Broadcast (broadcast.cc).
constexpr int kBinomialBroadcastTag = 141;
constexpr int kChainBroadcastTag = 142;
// Pairwise alltoallv (alltoall.cc).
constexpr int kPairwiseAlltoallvTag = 151;
// Adasum allreduce (adasum.cc).
constexpr int kAdasumExchangeTag = 161;
constexpr int kAdasumNormsTag = 162;
constexpr int kAdasumAllgatherTag = 163;

}  // namespace herd::collectives::detail
